"""Thread listings for the web app: which threads a mailbox shows, a page at a time.

A *view* is one sidebar entry (Inbox and one of its tabs, Starred, Snoozed,
Sent, Drafts, Archive, All mail, Spam, Trash or a user label), optionally
narrowed to the threads with a message in one account. Pages are keyset
pages over ``(last_message_at, id)``, newest first, so the hundredth page
costs what the first does; a :class:`Cursor` names the edge of a page.

Everything is plain SQL through a :class:`~mailroom.store.reader.Reader`,
like :mod:`mailroom.reading`: one query for the page, two for its rows
(senders and previews, labels), one for the sidebar's counts and one for
the tabs' unread counts. Binned threads (``in_trash``) show only in Trash.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from mailroom.categories.tabs import CATEGORIES, HELD, PRIMARY
from mailroom.reading import message_column
from mailroom.store.reader import Reader, as_reader, in_list, json_value, required_stamp

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    Source = Reader | Session

BOXES = ("inbox", "starred", "snoozed", "sent", "drafts", "archive", "all", "spam", "trash")
"""The fixed sidebar entries, in sidebar order; every one but ``all`` is a label role."""

PAGE_SIZE = 50
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Cursor:
    """The edge of a page: a thread's ``(last_message_at, id)``."""

    at: datetime
    thread_id: int

    def token(self) -> str:
        """The cursor as a URL value (``<microseconds since 1970>.<thread id>``)."""
        micros = (self.at - _EPOCH) // timedelta(microseconds=1)
        return f"{micros}.{self.thread_id}"

    @classmethod
    def parse(cls, token: str | None) -> Cursor | None:
        """The cursor a URL value names, or None if there is none or it is malformed."""
        if not token:
            return None
        micros, _, thread = token.partition(".")
        if not (micros.lstrip("-").isdigit() and thread.isdigit()) or len(micros) > 20:
            return None
        try:
            at = _EPOCH + timedelta(microseconds=int(micros))
        except OverflowError:
            return None
        return cls(at, int(thread))


@dataclass(frozen=True, slots=True)
class View:
    """What a listing shows: a box (or a user label), an inbox tab, an account."""

    box: str = "inbox"  # one of BOXES, or "label"
    label_id: int | None = None  # for box "label"
    tab: str | None = None  # for the inbox: one of CATEGORIES
    account_id: int | None = None
    tabs_off: frozenset[str] = frozenset()  # switched-off tabs: their mail shows in Primary


@dataclass(frozen=True, slots=True)
class ThreadRow:
    """One row of a listing."""

    id: int
    subject: str
    message_count: int
    unread: bool
    last_message_at: datetime
    category: str | None
    senders: list[tuple[str, bool]]  # (name, has an unread message), first to last
    preview: str
    has_attachment: bool
    starred: bool
    labels: list[tuple[int, str]]  # (id, path) of the user labels


@dataclass(frozen=True, slots=True)
class Page:
    """A page of rows and the cursors of its neighbours (None: there is none)."""

    rows: list[ThreadRow]
    older: Cursor | None
    newer: Cursor | None


@dataclass(frozen=True, slots=True)
class LabelCount:
    """A label in the sidebar: its unread threads (every thread for Drafts)."""

    id: int
    path: str
    name: str
    role: str | None
    parent_id: int | None
    count: int
    children: list[LabelCount] = field(default_factory=list)

    @property
    def depth(self) -> int:
        """How deep in the label tree (0 for a top-level label)."""
        return self.path.count("/")


def _bind_stamp(reader: Reader, at: datetime) -> Any:
    """A timestamp as the store compares it (SQLite keeps naive UTC text)."""
    if reader.dialect == "sqlite":
        return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return at


def _account_condition(account_id: int | None) -> tuple[str, dict[str, Any]]:
    if account_id is None:
        return "", {}
    return (
        " AND EXISTS (SELECT 1 FROM messages AS acct WHERE acct.thread_id = threads.id "
        "AND acct.account_id = :account)",
        {"account": account_id},
    )


def _view_sql(view: View, roles: dict[str, int]) -> tuple[str, str, dict[str, Any]] | None:
    """(join, conditions, params) choosing the view's threads; None if it can have none."""
    params: dict[str, Any] = {}
    conditions = ""
    if view.box == "all":
        spam = roles.get("spam")
        join = ""
        conditions = " AND NOT threads.in_trash"
        if spam is not None:
            conditions += (
                " AND NOT EXISTS (SELECT 1 FROM thread_labels AS spam WHERE "
                "spam.thread_id = threads.id AND spam.label_id = :spam)"
            )
            params["spam"] = spam
    else:
        label = view.label_id if view.box == "label" else roles.get(view.box)
        if label is None:
            return None
        join = (
            " JOIN thread_labels ON thread_labels.thread_id = threads.id "
            "AND thread_labels.label_id = :box"
        )
        params["box"] = label
        if view.box != "trash":
            conditions = " AND NOT threads.in_trash"
    if view.box == "inbox" and view.tab is not None:
        if view.tab == PRIMARY:
            off = sorted(view.tabs_off - {PRIMARY})
            listed, off_params = in_list("off", off)
            also = f" OR threads.category IN {listed}" if off else ""
            conditions += f" AND (threads.category IS NULL OR threads.category = :tab{also})"
            params.update(off_params)
        else:
            conditions += " AND threads.category = :tab"
        params["tab"] = view.tab
    account, account_params = _account_condition(view.account_id)
    return join, conditions + account, {**params, **account_params}


def thread_page(
    source: Source,
    user: int,
    view: View,
    roles: dict[str, int],
    *,
    before: Cursor | None = None,
    after: Cursor | None = None,
    size: int = PAGE_SIZE,
) -> Page:
    """A page of the view's threads, newest first: the first one, the one older than
    ``before`` or the one newer than ``after``. ``roles`` maps system roles to label ids."""
    reader = as_reader(source)
    chosen = _view_sql(view, roles)
    if chosen is None:
        return Page([], None, None)
    join, conditions, params = chosen
    params.update({"user": user, "limit": size + 1})
    order = "DESC"
    if before is not None:
        conditions += (
            " AND (threads.last_message_at < :at OR "
            "(threads.last_message_at = :at AND threads.id < :edge))"
        )
        params.update({"at": _bind_stamp(reader, before.at), "edge": before.thread_id})
    elif after is not None:
        conditions += (
            " AND (threads.last_message_at > :at OR "
            "(threads.last_message_at = :at AND threads.id > :edge))"
        )
        params.update({"at": _bind_stamp(reader, after.at), "edge": after.thread_id})
        order = "ASC"
    found = reader.rows(
        "SELECT threads.id, threads.subject, threads.message_count, threads.unread_count, "
        f"threads.last_message_at, threads.category FROM threads{join} "
        "WHERE threads.user_id = :user AND threads.message_count > 0 "
        f"AND threads.last_message_at IS NOT NULL{conditions} "
        f"ORDER BY threads.last_message_at {order}, threads.id {order} LIMIT :limit",
        params,
    )
    more = len(found) > size
    found = found[:size]
    if after is not None:
        found.reverse()
    rows = thread_rows(reader, user, found)
    first = Cursor(rows[0].last_message_at, rows[0].id) if rows else None
    last = Cursor(rows[-1].last_message_at, rows[-1].id) if rows else None
    if after is not None:
        return Page(rows, older=last, newer=first if more else None)
    return Page(rows, older=last if more else None, newer=first if before is not None else None)


def thread_rows(source: Source, user: int, threads: Sequence[Sequence[Any]]) -> list[ThreadRow]:
    """Rows for threads already chosen, in the given order.

    ``threads`` are ``(id, subject, message_count, unread_count, last_message_at,
    category)`` as :func:`thread_page` selects them (search results can select the
    same columns); senders, previews, attachments and labels take two queries.
    """
    reader = as_reader(source)
    ids = [int(row[0]) for row in threads]
    if not ids:
        return []
    listed, params = in_list("thread", ids)
    senders: dict[int, dict[str, bool]] = defaultdict(dict)
    preview: dict[int, str] = {}
    attached: set[int] = set()
    sealed_subject: dict[int, str] = {}  # a sealed thread's subject: its oldest message's
    for thread, name, email, unread, has_attachment, text, mid, sealed, subject in reader.rows(
        "SELECT thread_id, from_name, from_email, "
        "CASE WHEN seen_at IS NULL THEN 1 ELSE 0 END, has_attachment, preview, id, sealed, "
        "CASE WHEN sealed THEN subject END "
        # "+ 0": by the thread index, not a walk of the user's messages in received order
        f"FROM messages WHERE thread_id IN {listed} AND user_id + 0 = :user "
        "ORDER BY received_at, id",
        {**params, "user": user},
    ):
        if sealed:  # mail columns opened (crypto.message_fields)
            name, email, text = (
                message_column(reader, user, mid, column, value, True)
                for column, value in (("from_name", name), ("from_email", email), ("preview", text))
            )
            if thread not in senders:  # the oldest message
                sealed_subject[thread] = message_column(reader, user, mid, "subject", subject, True)
        who = name or email or "(unknown sender)"
        senders[thread][who] = senders[thread].get(who, False) or bool(unread)
        preview[thread] = text or ""
        if has_attachment:
            attached.add(thread)
    labels: dict[int, list[tuple[int, str]]] = defaultdict(list)
    starred: set[int] = set()
    for thread, label, path, role in reader.rows(
        "SELECT thread_labels.thread_id, labels.id, labels.path, labels.role "
        "FROM thread_labels JOIN labels ON labels.id = thread_labels.label_id "
        f"WHERE thread_labels.thread_id IN {listed} "
        "AND (labels.role IS NULL OR labels.role = 'starred') ORDER BY labels.path",
        params,
    ):
        if role == "starred":
            starred.add(thread)
        else:
            labels[thread].append((int(label), path))
    rows = []
    for thread, subject, count, unread, last, category in threads:
        moment = required_stamp(last)
        rows.append(
            ThreadRow(
                id=int(thread),
                subject=subject or sealed_subject.get(int(thread), ""),
                message_count=int(count),
                unread=int(unread) > 0,
                last_message_at=moment,
                category=category,
                senders=list(senders[thread].items()),
                preview=preview.get(thread, ""),
                has_attachment=thread in attached,
                starred=thread in starred,
                labels=labels.get(thread, []),
            )
        )
    return rows


def label_tree(source: Source, user: int, account_id: int | None = None) -> list[LabelCount]:
    """Every label of the user with its unread threads (Drafts: all its threads),
    the system labels in :data:`BOXES` order, then the user labels as a tree by path.

    Binned threads count only in Trash; with ``account_id`` only threads with a
    message in that account count.
    """
    reader = as_reader(source)
    account, params = _account_condition(account_id)
    values = {"user": user, **params}
    # Threads first: one pass over the user's unread threads (the few Drafts and Trash
    # threads on their own), not a thread look-up for every thread in every label.
    counts: dict[int, int] = defaultdict(int)
    for label_id, count in [
        *reader.rows(
            "SELECT thread_labels.label_id, count(*) FROM threads "
            "JOIN thread_labels ON thread_labels.thread_id = threads.id "
            "JOIN labels ON labels.id = thread_labels.label_id "
            "WHERE threads.user_id = :user AND threads.unread_count > 0 "
            "AND NOT threads.in_trash "
            "AND (labels.role IS NULL OR labels.role NOT IN ('drafts', 'trash'))"
            f"{account} GROUP BY thread_labels.label_id",
            values,
        ),
        *reader.rows(
            "SELECT labels.id, count(*) FROM labels "
            "JOIN thread_labels ON thread_labels.label_id = labels.id "
            "JOIN threads ON threads.id = thread_labels.thread_id "
            "WHERE labels.user_id = :user AND labels.role IN ('drafts', 'trash') AND ("
            "(labels.role = 'drafts' AND NOT threads.in_trash) "
            f"OR (labels.role = 'trash' AND threads.unread_count > 0)){account} "
            "GROUP BY labels.id",
            values,
        ),
    ]:
        counts[int(label_id)] += int(count)
    found = [
        LabelCount(int(i), path, name, role, parent, counts.get(int(i), 0))
        for i, path, name, role, parent in reader.rows(
            "SELECT id, path, name, role, parent_id FROM labels WHERE user_id = :user "
            "ORDER BY path",
            {"user": user},
        )
    ]
    system = sorted(
        (label for label in found if label.role in BOXES),
        key=lambda label: BOXES.index(label.role or ""),
    )
    by_id = {label.id: label for label in found if label.role is None}
    roots = []
    for label in by_id.values():
        parent = by_id.get(label.parent_id) if label.parent_id is not None else None
        if parent is not None:
            parent.children.append(label)
        else:
            roots.append(label)
    return system + roots


def tab_unread(
    source: Source, user: int, inbox_id: int, account_id: int | None = None
) -> dict[str, int]:
    """Unread Inbox threads per tab (threads without a tab count as Primary)."""
    reader = as_reader(source)
    account, params = _account_condition(account_id)
    counts: dict[str, int] = defaultdict(int)
    for category, count in reader.rows(
        # "+ 0": walk the user's threads (the unread test needs each row anyway)
        # rather than look up every Inbox thread by the label index.
        "SELECT threads.category, count(threads.id) FROM threads "
        "JOIN thread_labels ON thread_labels.thread_id = threads.id "
        "AND thread_labels.label_id + 0 = :inbox "
        "WHERE threads.user_id = :user AND threads.unread_count > 0 "
        f"AND NOT threads.in_trash{account} GROUP BY threads.category",
        {"user": user, "inbox": inbox_id, **params},
    ):
        if category != HELD:  # held for the assistant: in no tab yet
            counts[category if category in CATEGORIES else PRIMARY] += int(count)
    return dict(counts)


@dataclass(frozen=True, slots=True)
class Owner:
    """What every page needs to know about the signed-in user."""

    settings: dict[str, Any]
    accounts: list[tuple[int, str]]  # (id, name), by name

    @property
    def tabs_off(self) -> frozenset[str]:
        """The tabs the user switched off (``settings["categories_off"]``)."""
        value = self.settings.get("categories_off")
        return frozenset(str(v) for v in value) if isinstance(value, list) else frozenset()

    @property
    def tabs_on(self) -> list[str]:
        """The inbox tabs shown, in order (Primary is always on)."""
        off = self.tabs_off
        return [tab for tab in CATEGORIES if tab == PRIMARY or tab not in off]

    def inbox_tab(self, wanted: str) -> str:
        """``wanted`` if it is a tab the user sees, else Primary."""
        return wanted if wanted in self.tabs_on else PRIMARY


def owner(source: Source, user: int) -> Owner:
    """The user's settings and accounts, in one query."""
    reader = as_reader(source)
    rows = reader.rows(
        "SELECT users.settings, accounts.id, accounts.name FROM users "
        "LEFT OUTER JOIN accounts ON accounts.user_id = users.id "
        "WHERE users.id = :user ORDER BY accounts.name",
        {"user": user},
    )
    settings = json_value(rows[0][0]) if rows else None
    accounts = [(int(row[1]), row[2]) for row in rows if row[1] is not None]
    return Owner(settings if isinstance(settings, dict) else {}, accounts)
