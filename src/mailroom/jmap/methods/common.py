"""Argument checks shared by the methods (RFC 8620 §5 standard arguments)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session

from mailroom.jmap.changes import States, current_states, parse_state
from mailroom.jmap.dispatcher import MAX_INT, Context
from mailroom.jmap.errors import MethodError, invalid_arguments
from mailroom.store.changelog import ChangeSet

MAIL = "urn:ietf:params:jmap:mail"
CORE = "urn:ietf:params:jmap:core"
SUBMISSION = "urn:ietf:params:jmap:submission"
TABS = "urn:mailroom:jmap:tabs"
EVENTS = "urn:mailroom:jmap:events"  # the Email property `events` (mailroom.events)
VACATION = "urn:ietf:params:jmap:vacationresponse"
WEBSOCKET = "urn:ietf:params:jmap:websocket"


def requested_ids(
    context: Context, args: dict[str, Any], *, required: bool = False
) -> list[str] | None:
    """The ``ids`` argument: a list of strings, or None for "all"."""
    value = args.get("ids")
    if value is None:
        if required:
            raise invalid_arguments("ids must be given for this type.")
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid_arguments("ids must be a list of ids or null.")
    if len(value) > context.limits.max_objects_in_get:
        raise MethodError(
            "requestTooLarge",
            f"At most maxObjectsInGet ({context.limits.max_objects_in_get}) ids per call.",
        )
    return list(dict.fromkeys(value))


def requested_properties(
    args: dict[str, Any], known: Collection[str], default: Iterable[str], key: str = "properties"
) -> list[str]:
    """The ``properties`` argument checked against the known ones; ``id`` always included."""
    value = args.get(key)
    if value is None:
        chosen = list(default)
    else:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise invalid_arguments(f"{key} must be a list of property names or null.")
        unknown = [v for v in value if v not in known and not v.startswith("header:")]
        if unknown:
            raise invalid_arguments(f"Unknown property {unknown[0]!r}.")
        chosen = list(dict.fromkeys(value))
    if key == "properties" and "id" not in chosen:
        chosen.insert(0, "id")
    return chosen


def is_int(value: object, *, minimum: int = -MAX_INT) -> bool:
    """Whether ``value`` is a JMAP Int (RFC 8620 §1.3: at most 2^53-1 either way) >= ``minimum``."""
    return isinstance(value, int) and not isinstance(value, bool) and minimum <= value <= MAX_INT


def max_changes(args: dict[str, Any]) -> int | None:
    """The ``maxChanges`` argument: a positive integer or None."""
    value = args.get("maxChanges")
    if value is None:
        return None
    if not is_int(value, minimum=1):
        raise invalid_arguments("maxChanges must be a positive integer (at most 2^53-1) or null.")
    assert isinstance(value, int)
    return value


def unsigned(args: dict[str, Any], key: str, default: int) -> int:
    """An UnsignedInt argument."""
    value = args.get(key, default)
    if value is None:
        return default
    if not is_int(value, minimum=0):
        raise invalid_arguments(f"{key} must be an unsigned integer (at most 2^53-1).")
    assert isinstance(value, int)
    return value


def integer(args: dict[str, Any], key: str, default: int) -> int:
    """An Int argument (may be negative)."""
    value = args.get(key, default)
    if value is None:
        return default
    if not is_int(value):
        raise invalid_arguments(f"{key} must be an integer between -(2^53-1) and 2^53-1.")
    assert isinstance(value, int)
    return value


def boolean(args: dict[str, Any], key: str, default: bool = False) -> bool:
    """A Boolean argument."""
    value = args.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise invalid_arguments(f"{key} must be true or false.")
    return value


def utc_date(value: datetime | None) -> str | None:
    """A UTCDate string (``2024-03-01T09:00:00Z``)."""
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_utc_date(value: object, name: str) -> datetime:
    """A UTCDate argument as an aware datetime."""
    if not isinstance(value, str):
        raise invalid_arguments(f"{name} must be a UTCDate string.")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise invalid_arguments(f"{name} is not a date like 2024-03-01T09:00:00Z.") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def get_response(
    context: Context, state: int, found: list[dict[str, Any]], missing: list[str]
) -> dict[str, Any]:
    """The body of a Foo/get response (RFC 8620 §5.1)."""
    return {
        "accountId": context.account_id,
        "state": str(state),
        "list": found,
        "notFound": missing,
    }


def changes_response(
    context: Context, since: int, changes: ChangeSet, to_id: Callable[[int], str]
) -> dict[str, Any]:
    """The body of a Foo/changes response (RFC 8620 §5.2) for a folded change set."""
    return {
        "accountId": context.account_id,
        "oldState": str(since),
        "newState": str(changes.new_state),
        "hasMoreChanges": changes.has_more,
        "created": [to_id(i) for i in changes.created],
        "updated": [to_id(i) for i in changes.updated],
        "destroyed": [to_id(i) for i in changes.destroyed],
    }


ChangeReader = Callable[[Session, int, int, int | None], ChangeSet]


def type_changes(
    context: Context,
    session: Session,
    args: dict[str, Any],
    *,
    floor_types: tuple[str, ...],
    state: Callable[[States], int],
    read: ChangeReader,
    to_id: Callable[[int], str],
) -> dict[str, Any]:
    """Foo/changes (RFC 8620 §5.2): one type's changes since ``sinceState``.

    ``floor_types`` are the change-log types whose retention floor bounds how old
    a ``sinceState`` may be; ``state`` picks the type's current state and ``read``
    folds its changes.
    """
    user_id = context.check_account(args)
    limit = max_changes(args)
    states = current_states(session, user_id)
    since = parse_state(args.get("sinceState"), states.floor(*floor_types), state(states))
    return changes_response(context, since, read(session, user_id, since, limit), to_id)
