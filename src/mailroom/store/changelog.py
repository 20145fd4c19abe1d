"""Recording and reading the change log (the JMAP state of each user and type).

``record`` must be called inside the transaction that makes the change, so a
change and its log row commit or vanish together. State tokens are decimal
strings of the highest ``seq`` for (user, type); ``"0"`` before any change.

For a state to be safe to hand out, a user's change rows must become visible
in ``seq`` order: a reader that saw ``seq`` 11 must never later find a
committed 10. SQLite has one writer at a time, so this holds by itself. On
PostgreSQL a sequence number is drawn at insert time, before commit, so two
writers could commit out of order; ``record`` therefore takes a transaction
advisory lock per user first, and a second writer of the same user waits
until the first has committed or rolled back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import func, insert, select, text
from sqlalchemy.orm import Session

from mailroom.store.models import CHANGE_KINDS, Change

CHANGE_TYPES = ("Email", "Thread", "Mailbox", "Identity", "VacationResponse", "EmailSubmission")
_LOCK_SPACE = 0x6D61696C  # "mail": the first key of the per-user advisory lock
_USER_LOCK = text("SELECT pg_advisory_xact_lock(:space, :user)")


def record(
    session: Session, user_id: int, type_: str, object_ids: Iterable[int], kind: str
) -> None:
    """Append one change row per object id (a type of :data:`CHANGE_TYPES`)."""
    if type_ not in CHANGE_TYPES or kind not in CHANGE_KINDS:
        raise ValueError(f"unknown change {type_}/{kind}")
    rows = [
        {"user_id": user_id, "type": type_, "object_id": object_id, "kind": kind}
        for object_id in object_ids
    ]
    if rows:
        if session.get_bind().dialect.name == "postgresql":
            session.execute(_USER_LOCK, {"space": _LOCK_SPACE, "user": user_id})
        session.execute(insert(Change), rows)


def current_state(session: Session, user_id: int, type_: str) -> str:
    """The state token of (user, type): the highest sequence number, as a string."""
    seq = session.scalar(
        select(func.max(Change.seq)).where(Change.user_id == user_id, Change.type == type_)
    )
    return str(seq or 0)


@dataclass
class ChangeSet:
    """Objects created, updated and destroyed since a state, and the new state (sequences)."""

    old_state: int
    new_state: int
    has_more: bool = False
    created: list[int] = field(default_factory=list)
    updated: list[int] = field(default_factory=list)
    destroyed: list[int] = field(default_factory=list)


def changes_since(
    session: Session, user_id: int, type_: str, since: int, max_changes: int | None = None
) -> ChangeSet:
    """Fold the rows after ``since`` into created/updated/destroyed per RFC 8620 §5.2.

    With ``max_changes`` only that many rows are read (so at most that many
    ids come back), and ``new_state`` is the last row read: the next page
    starts there, under the same rules (see :func:`fold`).
    """
    query = (
        select(Change.seq, Change.object_id, Change.kind)
        .where(Change.user_id == user_id, Change.type == type_, Change.seq > since)
        .order_by(Change.seq)
    )
    if max_changes is not None:
        query = query.limit(max_changes + 1)
    rows = session.execute(query).all()
    has_more = max_changes is not None and len(rows) > max_changes
    if has_more:
        rows = rows[:max_changes]
    created: set[int] = set()
    last_kind: dict[int, str] = {}
    for _seq, object_id, kind in rows:
        if kind == "created":
            created.add(object_id)
        last_kind[object_id] = kind
    return fold(since, rows[-1].seq if rows else since, has_more, created, last_kind)


def fold(
    since: int,
    new_state: int,
    has_more: bool,
    created: set[int],
    last_kind: dict[int, str],
) -> ChangeSet:
    """The change set from the objects created in the window and each one's last change.

    RFC 8620 §5.2: an object created in the window is in ``created`` only,
    however often it changed afterwards; one created and destroyed in the
    window is left out (the client never saw it); one whose last change is a
    destroy is in ``destroyed``; any other is ``updated``. ``last_kind``
    holds every object of the window, in the order of their first change.
    """
    result = ChangeSet(since, new_state, has_more)
    for object_id, last in last_kind.items():
        if last == "destroyed":
            if object_id not in created:
                result.destroyed.append(object_id)
        elif object_id in created:
            result.created.append(object_id)
        else:
            result.updated.append(object_id)
    return result
