"""States of the types kept only in the change log (Identity, VacationResponse).

A state is the newest change-log sequence of (user, type), or the retention
floor when every row of the type has been pruned, so a state never goes back.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from mailroom.jmap.errors import MethodError, invalid_arguments
from mailroom.store.models import Change, ChangeFloor


def floor_of(session: Session, user_id: int, type_: str) -> int:
    """The highest pruned sequence of (user, type); 0 when nothing was pruned."""
    floor = session.get(ChangeFloor, (user_id, type_))
    return floor.seq if floor is not None else 0


def state_of(session: Session, user_id: int, type_: str) -> int:
    """The current state of (user, type) as a sequence number."""
    newest = session.scalar(
        select(func.max(Change.seq)).where(Change.user_id == user_id, Change.type == type_)
    )
    return max(int(newest or 0), floor_of(session, user_id, type_))


def check_if_in_state(value: object, current: int, type_: str) -> None:
    """The ``ifInState`` argument of a /set: ``stateMismatch`` unless it is the current state.

    Null asks nothing; a value other than a string is ``invalidArguments``.
    """
    if value is None:
        return
    if not isinstance(value, str):
        raise invalid_arguments("ifInState must be a state string or null.")
    if value != str(current):
        raise MethodError("stateMismatch", f"The {type_} state is {current}, not {value!r}.")
