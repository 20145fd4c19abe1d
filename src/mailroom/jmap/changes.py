"""JMAP states and ``Foo/changes`` on top of the change log, and its pruning.

States are decimal change-log sequence numbers (``store.changelog``), never
lower than the retention floor of their (user, type) (``change_floors``):

``Email``   highest sequence of the user's Email rows.
``Thread``  highest sequence of the user's Thread rows.
``Mailbox`` highest sequence of the user's Mailbox *and* Email rows. A
            mailbox's counts change with every message that enters, leaves or
            changes in it, and not every writer (ingest, a merge) logs those
            mailboxes; so Mailbox/changes also reports the current mailboxes
            of every Email changed since the state. (A destroyed Email whose
            mailboxes are no longer known marks every mailbox.)
query       ``Email/query`` states: the highest of Email and Thread (a thread's
            tab and membership decide collapsed and ``category`` results).

``/get`` reads the state *before* the data: a change committing in between
is then reported again by the next ``/changes`` (harmless), never lost.

A state older than the floor, newer than the current state or not a number
cannot be diffed: ``cannotCalculateChanges``, and the client resyncs.
``prune_changes`` deletes change rows older than a time and raises the
floors; the jobs service schedules it (RFC 8620 asks for 30 days).

States are safe to hand out because a user's change rows become visible in
sequence order (``store.changelog``: SQLite has one writer at a time; on
PostgreSQL ``record`` serializes a user's writers with an advisory lock).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from mailroom.jmap.errors import MethodError
from mailroom.jmap.scope import owned_by
from mailroom.store import changelog
from mailroom.store.changelog import ChangeSet
from mailroom.store.engine import Store
from mailroom.store.models import Change, ChangeFloor, Label, MessageLabel, Thread, utcnow

TYPES = ("Email", "Thread", "Mailbox")


@dataclass(frozen=True, slots=True)
class States:
    """The current states of one user, as integers."""

    email: int
    thread: int
    mailbox: int
    floors: dict[str, int] = field(default_factory=dict)

    @property
    def query(self) -> int:
        """The state of every ``Email/query``."""
        return max(self.email, self.thread)

    def of(self, type_: str) -> int:
        """The state of a type name (Email, Thread, Mailbox)."""
        return {"Email": self.email, "Thread": self.thread, "Mailbox": self.mailbox}[type_]

    def floor(self, *types: str) -> int:
        """The highest retention floor of these types."""
        return max((self.floors.get(type_, 0) for type_ in types), default=0)


def _newest(user_id: int, type_: str, table: Any) -> Any:
    column = table.seq
    return (
        select(func.max(column))
        .where(table.user_id == user_id, table.type == type_)
        .scalar_subquery()
    )


def current_states(session: Session, user_id: int) -> States:
    """The user's states now: one statement of index look-ups (log heads and floors)."""
    row = session.execute(
        select(
            *(_newest(user_id, t, Change) for t in TYPES),
            *(_newest(user_id, t, ChangeFloor) for t in TYPES),
        )
    ).one()
    raw = {t: int(row[i] or 0) for i, t in enumerate(TYPES)}
    floors = {t: int(row[len(TYPES) + i]) for i, t in enumerate(TYPES) if row[len(TYPES) + i]}
    email = max(raw["Email"], floors.get("Email", 0))
    thread = max(raw["Thread"], floors.get("Thread", 0))
    mailbox = max(raw["Mailbox"], floors.get("Mailbox", 0), email)
    return States(email, thread, mailbox, floors)


def parse_state(value: object, floor: int, current: int) -> int:
    """The sequence a client's state names, or ``cannotCalculateChanges``."""
    if not isinstance(value, str) or not value.isdigit() or len(value) > 19:
        raise MethodError("cannotCalculateChanges", "This state was not issued by this server.")
    since = int(value)
    if since > current:
        raise MethodError("cannotCalculateChanges", "This state is newer than the server's.")
    if since < floor:
        raise MethodError(
            "cannotCalculateChanges",
            "Changes this old are no longer kept; fetch the objects again.",
        )
    return since


def email_changes(session: Session, user_id: int, since: int, max_changes: int | None) -> ChangeSet:
    """``Email/changes`` from ``since`` (already checked by :func:`parse_state`)."""
    return changelog.changes_since(session, user_id, "Email", since, max_changes)


def thread_changes(
    session: Session, user_id: int, since: int, max_changes: int | None
) -> ChangeSet:
    """``Thread/changes``; a thread now gone or empty is destroyed (or, if new, left out).

    A merge logs the dissolved thread ``destroyed``; a thread emptied by
    deletes keeps its row, so emptiness is read here.
    """
    folded = changelog.changes_since(session, user_id, "Thread", since, max_changes)
    candidates = folded.updated + folded.created
    alive = set()
    if candidates:
        alive = set(
            session.scalars(
                select(Thread.id).where(
                    Thread.id.in_(candidates),
                    owned_by(Thread.user_id, user_id),
                    Thread.message_count > 0,
                )
            )
        )
    return ChangeSet(
        since,
        folded.new_state,
        folded.has_more,
        [t for t in folded.created if t in alive],
        [t for t in folded.updated if t in alive],
        folded.destroyed + [t for t in folded.updated if t not in alive],
    )


def mailbox_changes(
    session: Session, user_id: int, since: int, max_changes: int | None
) -> ChangeSet:
    """``Mailbox/changes``: logged Mailbox rows plus the mailboxes of changed Emails."""
    events: dict[int, list[tuple[str, int]]] = defaultdict(list)  # seq -> [(kind, mailbox)]
    for seq, object_id, kind in session.execute(
        select(Change.seq, Change.object_id, Change.kind).where(
            Change.user_id == user_id, Change.type == "Mailbox", Change.seq > since
        )
    ):
        events[seq].append((kind, object_id))
    for seq, label_id in session.execute(
        select(Change.seq, MessageLabel.label_id)
        .join(MessageLabel, MessageLabel.message_id == Change.object_id)
        .where(
            Change.user_id == user_id,
            Change.type == "Email",
            Change.kind != "destroyed",
            Change.seq > since,
        )
    ):
        events[seq].append(("updated", label_id))
    destroyed_seqs = list(
        session.scalars(
            select(Change.seq).where(
                Change.user_id == user_id,
                Change.type == "Email",
                Change.kind == "destroyed",
                Change.seq > since,
            )
        )
    )
    if destroyed_seqs:
        every = list(session.scalars(select(Label.id).where(Label.user_id == user_id)))
        for seq in destroyed_seqs:
            events[seq].extend(("updated", label_id) for label_id in every)
    # Email rows that touched no mailbox still move the state.
    last_seq = session.scalar(
        select(func.max(Change.seq)).where(
            Change.user_id == user_id, Change.type.in_(("Mailbox", "Email")), Change.seq > since
        )
    )
    # A mailbox created in the window did not exist for the client before
    # its created row: email changes before that row say nothing about it.
    born = {
        mailbox: seq
        for seq, batch in events.items()
        for kind, mailbox in batch
        if kind == "created"
    }
    created: set[int] = set()
    last: dict[int, str] = {}
    new_state = since
    has_more = False
    for seq in sorted(events):
        batch = [(kind, mailbox) for kind, mailbox in events[seq] if born.get(mailbox, 0) <= seq]
        if max_changes is not None:
            ids = set(last) | {mailbox for _, mailbox in batch}
            if len(ids) > max_changes:
                if new_state == since:
                    raise MethodError(
                        "cannotCalculateChanges",
                        f"One change touches more than maxChanges ({max_changes}) mailboxes.",
                    )
                has_more = True
                break
        for kind, mailbox in batch:
            if kind == "created":
                created.add(mailbox)
            last[mailbox] = kind
        new_state = seq
    if not has_more and last_seq is not None:
        new_state = max(new_state, last_seq)
    return changelog.fold(since, new_state, has_more, created, last)


def query_changes(session: Session, user_id: int, since: int) -> tuple[set[int], set[int]]:
    """Message ids and thread ids with Email or Thread changes after ``since``."""
    emails: set[int] = set()
    threads: set[int] = set()
    for type_, object_id in session.execute(
        select(Change.type, Change.object_id).where(
            Change.user_id == user_id, Change.type.in_(("Email", "Thread")), Change.seq > since
        )
    ):
        (emails if type_ == "Email" else threads).add(object_id)
    return emails, threads


def prune_changes(store: Store, older_than: datetime) -> int:
    """Delete change-log rows created before ``older_than``; raise the floors; count deleted.

    Idempotent, and safe beside writers: each (user, type) deletes only up to
    the floor it recorded in the same transaction. The newest row of the whole
    log is always kept: SQLite hands out ``max(seq) + 1`` to the next row
    (the column is a plain rowid), so deleting it would let new changes reuse
    sequence numbers that clients already hold as states.
    """
    deleted = 0
    with store.session() as session:
        newest = session.scalar(select(func.max(Change.seq)))
        if newest is None:
            return 0
        tops = session.execute(
            select(Change.user_id, Change.type, func.max(Change.seq))
            .where(Change.created_at < older_than, Change.seq < newest)
            .group_by(Change.user_id, Change.type)
        ).all()
        for user_id, type_, top in tops:
            floor = session.get(ChangeFloor, (user_id, type_))
            if floor is None:
                session.add(ChangeFloor(user_id=user_id, type=type_, seq=top, updated_at=utcnow()))
            elif top > floor.seq:
                floor.seq = top
                floor.updated_at = utcnow()
            session.flush()
            result = session.execute(
                delete(Change).where(
                    Change.user_id == user_id,
                    Change.type == type_,
                    Change.seq <= top,
                    Change.created_at < older_than,
                )
            )
            deleted += int(getattr(result, "rowcount", 0) or 0)
    return deleted
