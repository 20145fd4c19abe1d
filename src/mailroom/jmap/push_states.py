"""The states push reports (RFC 8620 §7.1 TypeState), read in one statement.

``Email``, ``Mailbox`` and ``Thread`` are the states of ``jmap.changes``;
``Identity``, ``VacationResponse`` and ``EmailSubmission`` the newest rows of
their change-log types (a submission's progress through its lane moves
``EmailSubmission``); ``EmailDelivery`` (RFC 8621 §1.5) the newest Email *creation*, so it
moves when mail arrives and not when a flag changes. mailroom's change log
does not tell delivered mail from an Email/import or a draft, so those move
``EmailDelivery`` too. Every state is at least its type's retention floor,
so pruning never moves a state backwards.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.selectable import ScalarSelect

from mailroom.jmap.changes import current_states
from mailroom.store.models import Change, ChangeFloor

_LOGGED = ("Identity", "VacationResponse", "EmailSubmission")
PUSH_TYPES = ("Email", "Mailbox", "Thread", "EmailDelivery", *_LOGGED)


def _newest(user_id: int, type_: str, kind: str | None = None) -> ScalarSelect[Any]:
    query = select(func.max(Change.seq)).where(Change.user_id == user_id, Change.type == type_)
    if kind is not None:
        query = query.where(Change.kind == kind)
    return query.scalar_subquery()


def _floor(user_id: int, type_: str) -> ScalarSelect[Any]:
    return (
        select(func.max(ChangeFloor.seq))
        .where(ChangeFloor.user_id == user_id, ChangeFloor.type == type_)
        .scalar_subquery()
    )


def push_states(session: Session, user_id: int) -> dict[str, int]:
    """Every push type's state of the user now."""
    states = current_states(session, user_id)
    row = session.execute(
        select(
            _newest(user_id, "Email", "created"),
            *(_newest(user_id, t) for t in _LOGGED),
            *(_floor(user_id, t) for t in _LOGGED),
        )
    ).one()
    delivered, *rest = (int(v or 0) for v in row)
    newest, floors = rest[: len(_LOGGED)], rest[len(_LOGGED) :]
    return {
        "Email": states.email,
        "Mailbox": states.mailbox,
        "Thread": states.thread,
        "EmailDelivery": max(delivered, states.floors.get("Email", 0)),
        **{t: max(n, f) for t, n, f in zip(_LOGGED, newest, floors, strict=True)},
    }
