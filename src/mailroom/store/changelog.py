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

CHANGE_TYPES = ("Email", "Thread", "Mailbox", "Identity", "VacationResponse")
_LOCK_SPACE = 0x6D61696C  # "mail": the first key of the per-user advisory lock
_USER_LOCK = text("SELECT pg_advisory_xact_lock(:space, :user)")


def record(
    session: Session, user_id: int, type_: str, object_ids: Iterable[int], kind: str
) -> None:
    """Append one change row per object id (type: Email, Thread, Mailbox)."""
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
    """Fold the rows after ``since`` into created/updated/destroyed per RFC 8620 /changes.

    An object created and destroyed inside the window is reported nowhere; one
    created and then updated is reported as created only.
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
    first_kind: dict[int, str] = {}
    last_kind: dict[int, str] = {}
    for _seq, object_id, kind in rows:
        first_kind.setdefault(object_id, kind)
        last_kind[object_id] = kind
    return fold(since, rows[-1].seq if rows else since, has_more, first_kind, last_kind)


def fold(
    since: int,
    new_state: int,
    has_more: bool,
    first_kind: dict[int, str],
    last_kind: dict[int, str],
) -> ChangeSet:
    """The change set from each object's first and last kind of change in the window."""
    result = ChangeSet(since, new_state, has_more)
    for object_id, first in first_kind.items():
        last = last_kind[object_id]
        if last == "destroyed":
            if first != "created":
                result.destroyed.append(object_id)
        elif first == "created":
            result.created.append(object_id)
        else:
            result.updated.append(object_id)
    return result
