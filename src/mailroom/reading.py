"""Read models shared by the CLI and the web page: messages and threads as plain dicts.

Plain SQL through a :class:`~mailroom.store.reader.Reader`, the same on both
stores, so a read command needs neither SQLAlchemy nor the ORM
(``store.reader`` says why).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mailroom.errors import NotFoundError, unknown_user
from mailroom.providers.facts import importing
from mailroom.store.reader import Reader, as_reader, in_list, json_value, required_stamp, stamp
from mailroom.store.search import BlindTerms, match_clause

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    Source = Reader | Session  # every function takes a reader or an open session


def user_id(source: Source, name: str) -> int:
    """The id of the user called ``name``; NotFoundError in plain words if none."""
    reader = as_reader(source)
    rows = reader.rows("SELECT id FROM users WHERE name = :name", {"name": name})
    if not rows:
        raise unknown_user(name)
    return int(rows[0][0])


def _labels_of(reader: Reader, message_ids: Sequence[int]) -> dict[int, list[str]]:
    labels: dict[int, list[str]] = defaultdict(list)
    if message_ids:
        ids, params = in_list("id", message_ids)
        rows = reader.rows(
            "SELECT message_labels.message_id, labels.path FROM message_labels "
            "JOIN labels ON labels.id = message_labels.label_id "
            f"WHERE message_labels.message_id IN {ids} ORDER BY labels.path",
            params,
        )
        for message_id, path in rows:
            labels[message_id].append(path)
    return labels


def search_ids(
    source: Source, user: int, query: str, limit: int = 100, blind: BlindTerms | None = None
) -> list[int]:
    """Ids of the user's messages matching a full-text query, newest first (binned excluded).

    ``blind``: the query hashed for the user's sealed mail (``crypto.blind_index``), when
    they have some; without it only clear mail is searched.
    """
    reader = as_reader(source)
    clause = match_clause(reader.dialect, query, blind, user)
    if clause is None:
        return []
    condition, params = clause
    rows = reader.rows(
        "SELECT messages.id FROM messages LEFT JOIN threads ON threads.id = messages.thread_id "
        f"WHERE messages.user_id = :user AND {condition} "
        "AND (threads.in_trash IS NULL OR NOT threads.in_trash) "
        "ORDER BY messages.received_at DESC, messages.id DESC LIMIT :limit",
        {"user": user, "limit": limit, **params},
    )
    return [row[0] for row in rows]


def label_id(source: Source, user: int, path: str) -> int:
    """The id of the user's label ``path`` (exact, else ignoring case); NotFoundError if none."""
    reader = as_reader(source)
    exact = reader.rows(
        "SELECT id FROM labels WHERE user_id = :user AND path = :path",
        {"user": user, "path": path},
    )
    if exact:
        return int(exact[0][0])
    folded = reader.rows(
        "SELECT id FROM labels WHERE user_id = :user AND lower(path) = :path",
        {"user": user, "path": path.lower()},
    )
    if len(folded) != 1:
        raise NotFoundError(f"There is no label {path!r}; `mailroom labels` lists them.")
    return int(folded[0][0])


def label_counts(source: Source, user: int) -> list[tuple[str, str | None, int, int]]:
    """(path, role, threads, unread) of each label, system labels first; binned threads
    count only in Trash."""
    reader = as_reader(source)
    rows = reader.rows(
        "SELECT labels.path, labels.role, count(threads.id), "
        "coalesce(sum(threads.unread_count), 0) FROM labels "
        "LEFT OUTER JOIN thread_labels ON thread_labels.label_id = labels.id "
        "LEFT OUTER JOIN threads ON threads.id = thread_labels.thread_id "
        "AND (NOT threads.in_trash OR labels.role = 'trash') "
        "WHERE labels.user_id = :user GROUP BY labels.id, labels.path, labels.role "
        "ORDER BY labels.role IS NULL, labels.path",
        {"user": user},
    )
    return [(path, role, int(threads), int(unread)) for path, role, threads, unread in rows]


@dataclass(frozen=True, slots=True)
class MessageFilter:
    """What `mailroom list` narrows to; every field left at its default matches everything."""

    label_id: int | None = None
    category: str | None = None
    unread: bool = False
    repaired: bool = False  # stored with parse notes (a damaged part was repaired)

    def sql(self) -> tuple[str, dict[str, Any]]:
        """The conditions on ``messages`` (each starting with AND) and their parameters."""
        conditions: list[str] = []
        params: dict[str, Any] = {}
        if self.label_id is not None:
            conditions.append(
                "messages.id IN (SELECT message_id FROM message_labels WHERE label_id = :label)"
            )
            params["label"] = self.label_id
        if self.category is not None:
            # Mail held for the assistant's verdict is in no tab yet (mailroom.assistant.hold).
            conditions.append(
                "messages.category = :category AND (messages.category_held_at IS NULL "
                "OR messages.category_released_at IS NOT NULL)"
            )
            params["category"] = self.category
        if self.unread:
            conditions.append("messages.seen_at IS NULL")
        if self.repaired:
            # JSON on both stores; json_array_length exists in SQLite and PostgreSQL alike.
            conditions.append("json_array_length(messages.parse_notes) > 0")
        return "".join(f" AND {condition}" for condition in conditions), params


def count_messages(source: Source, user: int, where: MessageFilter = MessageFilter()) -> int:
    """How many of the user's messages match the filter."""
    reader = as_reader(source)
    conditions, params = where.sql()
    rows = reader.rows(
        f"SELECT count(messages.id) FROM messages WHERE messages.user_id = :user{conditions}",
        {"user": user, **params},
    )
    return int(rows[0][0] or 0)


_LISTED = (
    "messages.id, accounts.name, messages.message_id_header, messages.thread_id, "
    "messages.subject, messages.from_email, messages.from_name, messages.received_at, "
    "messages.category, messages.seen_at, messages.sealed"
)


def list_messages(
    source: Source,
    user: int,
    *,
    limit: int | None = None,
    ids: Sequence[int] | None = None,
    where: MessageFilter = MessageFilter(),
) -> list[dict[str, Any]]:
    """The user's messages (or the given ids), newest first, as dicts for `mailroom list`."""
    reader = as_reader(source)
    conditions, params = where.sql()
    if ids is not None:
        if not ids:
            return []
        listed, id_params = in_list("id", ids)
        conditions += f" AND messages.id IN {listed}"
        params.update(id_params)
    sql = (
        f"SELECT {_LISTED} FROM messages JOIN accounts ON accounts.id = messages.account_id "
        f"WHERE messages.user_id = :user{conditions} "
        "ORDER BY messages.received_at DESC, messages.id DESC"
    )
    if limit is not None:
        sql += " LIMIT :limit"
        params["limit"] = limit
    rows = reader.rows(sql, {"user": user, **params})
    labels = _labels_of(reader, [row[0] for row in rows])
    header_ids = _sealed_message_ids(source, [row[0] for row in rows if row[-1]])
    listed_rows = []
    for row in rows:
        message, account, header_id, thread, subject, email, name, received, tab, seen, sealed = row
        if sealed:  # opened (crypto.message_fields); the Message-ID from the sealed headers
            subject, email, name = (
                message_column(source, user, message, column, value, True)
                for column, value in (
                    ("subject", subject),
                    ("from_email", email),
                    ("from_name", name),
                )
            )
            header_id = header_ids.get(message)
        received_at = required_stamp(received)
        listed_rows.append(
            {
                "id": message,
                "account": account,
                "message_id": header_id,
                "thread_id": thread,
                "subject": subject,
                "from": email,
                "from_name": name,
                "received_at": received_at.isoformat(),
                "category": tab,
                "labels": labels.get(message, []),
                "seen": seen is not None,
            }
        )
    return listed_rows


def _sealed_message_ids(source: Source, message_ids: Sequence[int]) -> dict[int, str | None]:
    """The clear Message-ID of sealed messages (their row holds a keyed hash of it)."""
    if not message_ids:
        return {}
    from mailroom.crypto.mail_reading import session_of
    from mailroom.errors import SealedWithoutKeys
    from mailroom.jmap.sealed_columns import message_ids_of

    session = session_of(source)
    if session is None:
        raise SealedWithoutKeys(
            "This message is sealed and this store was opened without its keys; read it "
            "through mailroom with MAILROOM_MASTER_KEY_FILE set."
        )
    return message_ids_of(session, message_ids)


def newest_threads(source: Source, user: int, limit: int = 50) -> list[dict[str, Any]]:
    """The user's newest threads (binned ones left out) with their senders, for the web page."""
    reader = as_reader(source)
    threads = reader.rows(
        "SELECT id, subject, message_count, unread_count, last_message_at, category "
        "FROM threads WHERE user_id = :user AND message_count > 0 AND NOT in_trash "
        "ORDER BY last_message_at DESC, id DESC LIMIT :limit",
        {"user": user, "limit": limit},
    )
    senders: dict[int | None, list[str]] = defaultdict(list)
    if threads:
        listed, params = in_list("thread", [row[0] for row in threads])
        rows = reader.rows(
            "SELECT thread_id, from_name, from_email, id, sealed FROM messages "
            f"WHERE thread_id IN {listed} ORDER BY received_at",
            params,
        )
        for thread_id, name, email, message, sealed in rows:
            if sealed:
                name = message_column(source, user, message, "from_name", name, True)
                email = message_column(source, user, message, "from_email", email, True)
            who = name or email
            if who and who not in senders[thread_id]:
                senders[thread_id].append(who)
    sealed_subjects = thread_subjects(source, user, [row[0] for row in threads if not row[1]])
    return [
        {
            "id": thread,
            "subject": subject or sealed_subjects.get(thread, subject),
            "message_count": messages,
            "unread_count": unread,
            "last_message_at": stamp(last),
            "category": tab,
            "senders": senders.get(thread, []),
        }
        for thread, subject, messages, unread, last, tab in threads
    ]


def user_message(reader: Reader, user: int, message_id: int, columns: str) -> Sequence[Any]:
    """These columns of the user's message ``message_id``; NotFoundError if not the user's."""
    found = reader.rows(
        f"SELECT {columns} FROM messages WHERE id = :id AND user_id = :user",
        {"id": message_id, "user": user},
    )
    if not found:
        raise _missing(message_id)
    return found[0]


def _missing(message_id: int) -> NotFoundError:
    return NotFoundError(f"There is no message {message_id}; `mailroom list` shows the ids.")


def message_detail(source: Source, user: int, message_id: int) -> dict[str, Any]:
    """One message with bodies and parse notes; NotFoundError if not the user's."""
    found = message_details(source, user, [message_id])
    if not found:
        raise _missing(message_id)
    return found[0]


def _opened(
    source: Source, user: int, message_id: int, column: str, value: Any, sealed: Any
) -> Any:
    """A body column as the reader sees it; the cipher (and SQLAlchemy) load for sealed rows only,
    so the CLI's standard-library read path stays light for clear mail."""
    if not sealed:
        return json_value(value) if column == "attachments" and value is not None else value
    from mailroom.crypto.mail_reading import open_column, session_of

    return open_column(session_of(source), user, message_id, column, value, True)


def message_column(
    source: Source, owner: int, message_id: int, column: str, value: Any, sealed: Any
) -> Any:
    """A ``messages`` mail column (``crypto.message_fields``) as readers see it.

    A clear value passes through (``recipients`` as a dictionary); a sealed one is
    opened with the keys of the source's session, and the cipher (and SQLAlchemy) load
    for sealed rows only. A reader without keys meets SealedWithoutKeys (one sentence).
    """
    if not sealed:
        return json_value(value) if column == "recipients" and value is not None else value
    from mailroom.crypto.mail_reading import session_of
    from mailroom.crypto.message_fields import open_value

    return open_value(session_of(source), owner, message_id, column, value, True)


def thread_subjects(source: Source, user: int, thread_ids: Sequence[int]) -> dict[int, str]:
    """The subject of each of these threads whose oldest message is sealed, opened.

    ``threads.subject`` is '' for them (never a copy of the sealed value): the
    subject is the oldest message's, as ``conversations.refresh`` picks it.
    """
    if not thread_ids:
        return {}
    reader = as_reader(source)
    listed, params = in_list("thread", thread_ids)
    rows = reader.rows(
        "SELECT thread_id, id, sealed, subject FROM messages "
        f"WHERE thread_id IN {listed} AND user_id + 0 = :user ORDER BY received_at, id",
        {**params, "user": user},
    )
    oldest: dict[int, Any] = {}
    for row in rows:
        oldest.setdefault(int(row[0]), row)
    return {
        thread: str(message_column(source, user, int(mid), "subject", subject, True) or "")
        for thread, (_t, mid, sealed, subject) in oldest.items()
        if sealed
    }


def message_details(source: Source, user: int, message_ids: Sequence[int]) -> list[dict[str, Any]]:
    """The user's messages among ``message_ids``, in that order, with bodies and parse
    notes (a thread's messages in three queries, not three per message)."""
    reader = as_reader(source)
    listed = {detail["id"]: detail for detail in list_messages(reader, user, ids=message_ids)}
    if not listed:
        return []
    ids_sql, params = in_list("id", listed)
    extra = {
        row[0]: row[1:]
        for row in reader.rows(
            "SELECT id, recipients, preview, parse_notes, thread_note, category_stage, "
            f"category_signal, sealed FROM messages WHERE id IN {ids_sql}",
            params,
        )
    }
    bodies = {
        message_id: (
            _opened(source, user, message_id, "text_body", text, sealed),
            _opened(source, user, message_id, "sanitized_html", sanitized, sealed),
            _opened(source, user, message_id, "attachments", attachments, sealed),
        )
        for message_id, sealed, text, sanitized, attachments in reader.rows(
            "SELECT message_id, sealed, text_body, sanitized_html, attachments "
            f"FROM message_bodies WHERE message_id IN {ids_sql}",
            params,
        )
    }
    details = []
    for message_id in message_ids:
        detail = listed.get(message_id)
        if detail is None:
            continue
        recipients, preview, notes, thread_note, stage, signal, sealed = extra[message_id]
        if sealed:  # opened (crypto.message_fields)
            recipients, preview, signal = (
                message_column(source, user, message_id, column, value, True)
                for column, value in (
                    ("recipients", recipients),
                    ("preview", preview),
                    ("category_signal", signal),
                )
            )
        text, sanitized, attachments = bodies.get(message_id, ("", None, []))
        addressed = json_value(recipients) or {}
        detail.update(
            {
                "to": addressed.get("to", []),
                "cc": addressed.get("cc", []),
                "preview": preview,
                "text": text,
                "sanitized_html": sanitized,
                "attachments": attachments or [],
                "parse_notes": json_value(notes) or [],
                "thread_note": thread_note,
                "category_stage": stage,
                "category_signal": signal,
            }
        )
        details.append(detail)
    return details


def account_states(source: Source, user: int | None = None) -> list[dict[str, Any]]:
    """Each account (of one user, or everyone's) with its status and import state, for
    `mailroom accounts`, by owner then name.

    Provider-neutral: ``importing`` comes from the account row and what the provider
    declares as data (:mod:`mailroom.providers.facts`), so no provider is imported.
    """
    reader = as_reader(source)
    mine = "" if user is None else "WHERE accounts.user_id = :user "
    rows = reader.rows(
        "SELECT users.name, accounts.name, accounts.provider, accounts.status, "
        "accounts.status_reason, accounts.watch_state, accounts.import_done, "
        "accounts.import_total, accounts.import_finished_at, accounts.settings "
        f"FROM accounts JOIN users ON users.id = accounts.user_id {mine}"
        "ORDER BY users.name, accounts.name",
        {} if user is None else {"user": user},
    )
    listed = []
    for owner, name, provider, status, reason, watch, done, total, finished, config in rows:
        listed.append(
            {
                "owner": owner,
                "name": name,
                "provider": provider,
                "status": status,
                "status_reason": reason,
                "watch_state": watch,
                "importing": importing(provider, status, finished),
                "import_done": int(done or 0),
                "import_total": int(total or 0),
                "import_finished_at": stamp(finished),
                "settings": json_value(config) or {},
            }
        )
    return listed


def api_tokens(source: Source, user: int) -> list[dict[str, Any]]:
    """The user's API tokens, oldest first: id, name and their times (aware UTC or None)."""
    rows = as_reader(source).rows(
        "SELECT id, name, created_at, last_used_at, expires_at FROM api_tokens "
        "WHERE user_id = :user ORDER BY id",
        {"user": user},
    )
    return [
        {
            "id": int(token),
            "name": name,
            "created_at": stamp(created),
            "last_used_at": stamp(used),
            "expires_at": stamp(expires),
        }
        for token, name, created, used, expires in rows
    ]
