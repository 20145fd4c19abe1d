"""Writing what a provider says into the store: locations, folder labels, flags, orphans.

Provider-neutral: every provider (IMAP, Gmail, Graph, local files) reports its
view through these functions; a provider only translates its own vocabulary
first (IMAP: ``\\Seen``/``\\Flagged`` → :class:`Flags`, in
the IMAP provider's ``mirror`` module). The provider is the authority on *where* a
message is and on whether it is seen and starred; mailroom mirrors them:

* a location (folder plus UIDVALIDITY/UID or a provider reference) is a
  ``MessageLocation`` row; a message located in a folder carries that folder's
  label, and loses it when no location in a folder with that label is left.
  Labels that are not folder labels of this account (user labels kept only in
  the database, Snoozed) are never touched;
* *seen* is mirrored into ``seen_at`` and *starred* into the Starred label (the
  most recent report wins when copies in two folders disagree);
* *keywords* (every other flag, as lower-case JMAP keywords, e.g. ``$answered``)
  are mirrored into ``message_keywords`` when the provider reports them
  (``Flags.keywords`` not None): a reported keyword is added; a stored one the
  provider does not report is removed only if it is in ``Flags.keyword_scope``
  (the keywords the provider can hold; None = all), so a keyword the provider
  cannot store stays local instead of being dropped by the next sync;
* a message with no location left after a sync in which every folder answered
  is gone from the provider and is deleted (:func:`delete_orphans`).

**Pending local changes win.** While a message has a pending change in state
``pending`` (an operation not yet acknowledged by the provider), the provider's
older view must not revert it: its locations are still recorded (they are facts
the propagator needs), but its labels, flags and existence are left alone.

Every change writes its change-log rows (Email, Thread, Mailbox "updated";
Email "destroyed") in the caller's transaction, like every other writer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from sqlalchemy import Exists, and_, delete, exists, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from mailroom.labels.keywords import stored_keywords
from mailroom.labels.propagation import pending_message_ids
from mailroom.labels.resolver import system_label
from mailroom.store import changelog
from mailroom.store.chunks import in_chunks
from mailroom.store.models import (
    Account,
    Folder,
    Message,
    MessageKeyword,
    MessageLabel,
    MessageLocation,
    PendingChange,
    Thread,
    utcnow,
)

__all__ = [
    "AccountScope",
    "ChangeSet",
    "Flags",
    "Placed",
    "add_locations",
    "apply_flags",
    "delete_orphans",
    "insert_for",
    "known_messages",
    "located",
    "located_under",
    "orphans",
    "pending_messages",
    "remove_locations",
    "replace_labels",
]


@dataclass(frozen=True, slots=True)
class Flags:
    """What a provider says of a message's state: read, starred, and its other keywords.

    ``keywords`` None: the provider says nothing about keywords. ``keyword_scope``:
    the keywords the provider can hold (their absence means "removed"); None: all.
    """

    seen: bool
    starred: bool
    keywords: frozenset[str] | None = None
    keyword_scope: frozenset[str] | None = None


class Placed(NamedTuple):
    """A stored message found at a place in a folder: the UID or the provider's reference."""

    message_id: int
    flags: Flags | None = None  # None: the provider said nothing about the flags here
    uid: int | None = None
    provider_ref: str | None = None


def insert_for(session: Session, table: Any) -> sqlite.Insert | postgresql.Insert:
    """An INSERT with ON CONFLICT support for the session's database."""
    if session.get_bind().dialect.name == "sqlite":
        return sqlite.insert(table)
    return postgresql.insert(table)


@dataclass
class AccountScope:
    """Ids of one account that every mirror call needs (no ORM objects)."""

    account_id: int
    user_id: int
    starred_label: int
    folder_labels: dict[int, int]

    @classmethod
    def load(cls, session: Session, account_id: int) -> AccountScope:
        """Read the scope of an account."""
        user_id = session.scalars(select(Account.user_id).where(Account.id == account_id)).one()
        rows = session.execute(
            select(Folder.id, Folder.label_id).where(
                Folder.account_id == account_id, Folder.label_id.is_not(None)
            )
        ).all()
        return cls(
            account_id=account_id,
            user_id=user_id,
            starred_label=system_label(session, user_id, "starred").id,
            folder_labels={fid: int(lid) for fid, lid in rows if lid is not None},
        )


@dataclass
class ChangeSet:
    """What a sync step changed, written to the change log at the end of the transaction."""

    emails: set[int] = field(default_factory=set)
    mailboxes: set[int] = field(default_factory=set)
    destroyed: set[int] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.emails or self.mailboxes or self.destroyed)

    def record(self, session: Session, user_id: int) -> None:
        """Write Email/Thread/Mailbox "updated" rows for what changed, then forget it."""
        emails = sorted(self.emails - self.destroyed)
        changelog.record(session, user_id, "Email", emails, "updated")
        threads: set[int] = set()
        for chunk in in_chunks(emails):
            threads.update(
                t
                for t in session.scalars(
                    select(Message.thread_id).where(
                        Message.id.in_(chunk), Message.thread_id.is_not(None)
                    )
                )
                if t is not None
            )
        changelog.record(session, user_id, "Thread", sorted(threads), "updated")
        changelog.record(session, user_id, "Mailbox", sorted(self.mailboxes), "updated")
        self.emails.clear()
        self.mailboxes.clear()
        self.destroyed.clear()


# -- reading -------------------------------------------------------------------------


def pending_messages(session: Session, message_ids: Iterable[int]) -> set[int]:
    """The messages among ``message_ids`` with a pending change not yet acknowledged."""
    ids = sorted(set(message_ids))
    found: set[int] = set()
    for chunk in in_chunks(ids):
        found |= pending_message_ids(session, chunk)
    return found


def known_messages(
    session: Session, account_id: int, provider_ids: Iterable[str]
) -> dict[str, int]:
    """provider id → message id for the ids already stored in the account."""
    ids = sorted(set(provider_ids))
    found: dict[str, int] = {}
    for chunk in in_chunks(ids):
        found.update(
            (pid, mid)
            for pid, mid in session.execute(
                select(Message.provider_id, Message.id).where(
                    Message.account_id == account_id, Message.provider_id.in_(chunk)
                )
            )
        )
    return found


def located(
    session: Session, folder_id: int, uidvalidity: int, uids: Iterable[int] | None = None
) -> dict[int, int]:
    """UID → message id of the messages stored at these UIDs of the folder (all if None)."""
    query = select(MessageLocation.uid, MessageLocation.message_id).where(
        MessageLocation.folder_id == folder_id, MessageLocation.uidvalidity == uidvalidity
    )
    if uids is None:
        return {int(uid): mid for uid, mid in session.execute(query) if uid is not None}
    found: dict[int, int] = {}
    for chunk in in_chunks(sorted(set(uids))):
        found.update(
            (int(uid), mid)
            for uid, mid in session.execute(query.where(MessageLocation.uid.in_(chunk)))
            if uid is not None
        )
    return found


# -- writing -------------------------------------------------------------------------


def add_locations(
    session: Session,
    scope: AccountScope,
    changes: ChangeSet,
    folder_id: int,
    entries: Sequence[Placed],
    *,
    uidvalidity: int | None = None,
) -> None:
    """Record where messages are in a folder; the folder's label and the flags follow.

    Idempotent. Messages with pending local changes get the location only.
    """
    if not entries:
        return
    session.execute(
        insert_for(session, MessageLocation)
        .values(
            [
                {
                    "message_id": e.message_id,
                    "folder_id": folder_id,
                    "uidvalidity": uidvalidity,
                    "uid": e.uid,
                    "provider_ref": e.provider_ref,
                }
                for e in entries
            ]
        )
        .on_conflict_do_nothing()
    )
    message_ids = {e.message_id for e in entries}
    pending = pending_messages(session, message_ids)
    label = scope.folder_labels.get(folder_id)
    free = sorted(message_ids - pending)
    if label is not None and free:
        added = session.execute(
            insert_for(session, MessageLabel)
            .values([{"message_id": mid, "label_id": label} for mid in free])
            .on_conflict_do_nothing()
            .returning(MessageLabel.message_id)
        ).scalars()
        added_ids = set(added)
        if added_ids:
            changes.emails.update(added_ids)
            changes.mailboxes.add(label)
    flags = {
        e.message_id: e.flags
        for e in entries
        if e.flags is not None and e.message_id not in pending
    }
    if flags:
        apply_flags(session, scope, changes, flags, pending=set())


def located_under(label_id: int) -> Exists:
    """EXISTS: the ``MessageLabel`` row's message still has a location in a folder of this label."""
    return (
        exists()
        .where(
            MessageLocation.message_id == MessageLabel.message_id,
            MessageLocation.folder_id == Folder.id,
            Folder.label_id == label_id,
        )
        .correlate(MessageLabel)
    )


def remove_locations(
    session: Session,
    scope: AccountScope,
    changes: ChangeSet,
    folder_id: int,
    uids: Iterable[int] | None = None,
    *,
    uidvalidity: int | None = None,
    message_ids: Iterable[int] | None = None,
) -> set[int]:
    """Forget locations in a folder (the given UIDs, or all); returns the messages affected.

    ``message_ids`` limits it to those messages (providers without UIDs: Graph).

    A message loses the folder's label when no location in a folder with that label
    is left (unless it has pending local changes). Messages left without any
    location are *not* deleted here: a moved message shows up in its new folder
    later in the same sync (see :func:`delete_orphans`).
    """
    condition = MessageLocation.folder_id == folder_id
    if uidvalidity is not None:
        condition = and_(condition, MessageLocation.uidvalidity == uidvalidity)
    affected: set[int] = set()
    if message_ids is not None:
        for chunk in in_chunks(sorted(set(message_ids))):
            affected.update(
                session.scalars(
                    delete(MessageLocation)
                    .where(condition, MessageLocation.message_id.in_(chunk))
                    .returning(MessageLocation.message_id)
                )
            )
    elif uids is None:
        affected.update(
            session.scalars(
                delete(MessageLocation).where(condition).returning(MessageLocation.message_id)
            )
        )
    else:
        for chunk in in_chunks(sorted(set(uids))):
            affected.update(
                session.scalars(
                    delete(MessageLocation)
                    .where(condition, MessageLocation.uid.in_(chunk))
                    .returning(MessageLocation.message_id)
                )
            )
    label = scope.folder_labels.get(folder_id)
    if label is None or not affected:
        return affected
    free = sorted(affected - pending_messages(session, affected))
    for chunk in in_chunks(free):
        still_there = located_under(label)
        removed = set(
            session.scalars(
                delete(MessageLabel)
                .where(
                    MessageLabel.label_id == label,
                    MessageLabel.message_id.in_(chunk),
                    ~still_there,
                )
                .returning(MessageLabel.message_id)
            )
        )
        if removed:
            changes.emails.update(removed)
            changes.mailboxes.add(label)
    return affected


def replace_labels(
    session: Session, changes: ChangeSet, message_id: int, have: set[int], wanted: set[int]
) -> bool:
    """Make a message's labels among ``have`` the ``wanted`` ones; whether any changed.

    For a provider that decides a set of a message's labels (Gmail's labels,
    Graph's categories): the caller says which it holds now and which it should.
    """
    add, remove = wanted - have, have - wanted
    if add:
        session.execute(
            insert_for(session, MessageLabel)
            .values([{"message_id": message_id, "label_id": x} for x in sorted(add)])
            .on_conflict_do_nothing()
        )
    if remove:
        session.execute(
            delete(MessageLabel).where(
                MessageLabel.message_id == message_id, MessageLabel.label_id.in_(remove)
            )
        )
    if not (add or remove):
        return False
    changes.emails.add(message_id)
    changes.mailboxes.update(add | remove)
    return True


def apply_flags(
    session: Session,
    scope: AccountScope,
    changes: ChangeSet,
    flags: Mapping[int, Flags],
    *,
    pending: set[int] | None = None,
) -> set[int]:
    """Mirror *seen* into ``seen_at`` and *starred* into Starred; returns the changed ids."""
    if pending is None:
        pending = pending_messages(session, flags)
    wanted = {mid: f for mid, f in flags.items() if mid not in pending}
    if not wanted:
        return set()
    ids = sorted(wanted)
    seen_now: dict[int, bool] = {}
    starred_now: set[int] = set()
    for chunk in in_chunks(ids):
        for mid, seen_at in session.execute(
            select(Message.id, Message.seen_at).where(Message.id.in_(chunk))
        ):
            seen_now[mid] = seen_at is not None
        starred_now.update(
            session.scalars(
                select(MessageLabel.message_id).where(
                    MessageLabel.message_id.in_(chunk),
                    MessageLabel.label_id == scope.starred_label,
                )
            )
        )
    to_seen = [m for m in ids if m in seen_now and wanted[m].seen and not seen_now[m]]
    to_unseen = [m for m in ids if m in seen_now and not wanted[m].seen and seen_now[m]]
    to_star = [m for m in ids if m in seen_now and wanted[m].starred and m not in starred_now]
    to_unstar = [m for m in ids if not wanted[m].starred and m in starred_now]
    now = utcnow()
    for chunk in in_chunks(to_seen):
        session.execute(update(Message).where(Message.id.in_(chunk)).values(seen_at=now))
    for chunk in in_chunks(to_unseen):
        session.execute(update(Message).where(Message.id.in_(chunk)).values(seen_at=None))
    if to_star:
        session.execute(
            insert_for(session, MessageLabel)
            .values([{"message_id": m, "label_id": scope.starred_label} for m in to_star])
            .on_conflict_do_nothing()
        )
    for chunk in in_chunks(to_unstar):
        session.execute(
            delete(MessageLabel).where(
                MessageLabel.message_id.in_(chunk), MessageLabel.label_id == scope.starred_label
            )
        )
    changed = {*to_seen, *to_unseen, *to_star, *to_unstar}
    changed |= _mirror_keywords(session, {m: f for m, f in wanted.items() if m in seen_now})
    changes.emails.update(changed)
    if to_star or to_unstar:
        changes.mailboxes.add(scope.starred_label)
    return changed


def _mirror_keywords(session: Session, flags: Mapping[int, Flags]) -> set[int]:
    """Make ``message_keywords`` follow the reported keywords; returns the changed ids."""
    reported = {mid: f for mid, f in flags.items() if f.keywords is not None}
    if not reported:
        return set()
    stored = stored_keywords(session, reported)
    rows: list[dict[str, Any]] = []
    gone: list[tuple[int, str]] = []
    for mid, state in reported.items():
        keywords = state.keywords or frozenset()
        have = stored.get(mid, set())
        rows.extend({"message_id": mid, "keyword": k} for k in sorted(keywords - have))
        scope = state.keyword_scope
        gone.extend((mid, k) for k in sorted(have - keywords) if scope is None or k in scope)
    if rows:
        session.execute(insert_for(session, MessageKeyword).values(rows).on_conflict_do_nothing())
    for mid, keyword in gone:
        session.execute(
            delete(MessageKeyword).where(
                MessageKeyword.message_id == mid, MessageKeyword.keyword == keyword
            )
        )
    return {row["message_id"] for row in rows} | {mid for mid, _k in gone}


def orphans(session: Session, account_id: int) -> list[int]:
    """Messages of the account with no location and no pending local change."""
    no_location = ~exists().where(MessageLocation.message_id == Message.id).correlate(Message)
    no_pending = ~exists().where(
        PendingChange.message_id == Message.id, PendingChange.state == "pending"
    ).correlate(Message)
    return list(
        session.scalars(
            select(Message.id)
            .where(Message.account_id == account_id, no_location, no_pending)
            .order_by(Message.id)
        )
    )


def delete_orphans(
    session: Session, scope: AccountScope, changes: ChangeSet, ids: Sequence[int]
) -> list[int]:
    """Delete messages gone from the provider; logs Email destroyed, Thread updated."""
    if not ids:
        return []
    threads: set[int] = set()
    labels: set[int] = set()
    for chunk in in_chunks(list(ids)):
        threads.update(
            t
            for t in session.scalars(
                select(Message.thread_id).where(
                    Message.id.in_(chunk), Message.thread_id.is_not(None)
                )
            )
            if t is not None
        )
        labels.update(
            session.scalars(
                select(MessageLabel.label_id).where(MessageLabel.message_id.in_(chunk)).distinct()
            )
        )
        session.execute(delete(Message).where(Message.id.in_(chunk)))
    changelog.record(session, scope.user_id, "Email", list(ids), "destroyed")
    changes.destroyed.update(ids)
    changes.mailboxes.update(labels)
    existing = sorted(session.scalars(select(Thread.id).where(Thread.id.in_(threads))))
    changelog.record(session, scope.user_id, "Thread", existing, "updated")
    return list(ids)
