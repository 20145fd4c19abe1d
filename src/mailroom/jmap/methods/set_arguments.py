"""The ``create``, ``update`` and ``destroy`` arguments of a Foo/set, and its response.

RFC 8620 §5.3: each argument is optional and may be null (nothing of that kind); given, it
must have its type — ``create`` and ``update`` objects, ``destroy`` a list of
ids — or the whole call is ``invalidArguments``: an empty list is no
``create``, and ``false`` or ``0`` no ``destroy``. In the response every
map or list that would be empty is null, as the RFC's examples show.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import MethodError, invalid_arguments


@dataclass(frozen=True, slots=True)
class SetArguments:
    """What a /set asks for, checked for shape and against maxObjectsInSet."""

    create: dict[str, Any]
    update: dict[str, Any]
    destroy: list[str]


def _given(args: dict[str, Any], name: str, kind: type) -> Any:
    """The argument ``name`` (``kind()`` when absent or null), or None if it has another type."""
    value = args.get(name)
    if value is None:
        return kind()
    return value if isinstance(value, kind) else None


def set_arguments(
    context: Context, args: dict[str, Any], *, values_are_objects: bool = True
) -> SetArguments:
    """Parse the three arguments; ``invalidArguments`` or ``requestTooLarge`` if they are wrong.

    With ``values_are_objects`` every creation and patch must be an object too;
    without it the method checks each one and refuses it alone (Email/set).
    """
    create = _given(args, "create", dict)
    update = _given(args, "update", dict)
    destroy = _given(args, "destroy", list)
    if create is None or (
        values_are_objects and not all(isinstance(v, dict) for v in create.values())
    ):
        raise invalid_arguments("create must be an object of creation ids to objects.")
    if update is None or (
        values_are_objects and not all(isinstance(v, dict) for v in update.values())
    ):
        raise invalid_arguments("update must be an object of ids to patch objects.")
    if destroy is None or not all(isinstance(v, str) for v in destroy):
        raise invalid_arguments("destroy must be a list of ids.")
    most = context.limits.max_objects_in_set
    if len(create) + len(update) + len(destroy) > most:
        raise MethodError("requestTooLarge", f"At most maxObjectsInSet ({most}) objects per call.")
    return SetArguments(dict(create), dict(update), list(dict.fromkeys(destroy)))


def set_response(
    context: Context,
    old_state: object,
    new_state: object,
    *,
    created: Mapping[str, Any] | None = None,
    updated: Mapping[str, Any] | None = None,
    destroyed: Sequence[str] | None = None,
    not_created: Mapping[str, Any] | None = None,
    not_updated: Mapping[str, Any] | None = None,
    not_destroyed: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The response of a Foo/set in the context's account; empty outcomes are null."""
    return {
        "accountId": context.account_id,
        "oldState": str(old_state),
        "newState": str(new_state),
        "created": dict(created) if created else None,
        "updated": dict(updated) if updated else None,
        "destroyed": list(destroyed) if destroyed else None,
        "notCreated": dict(not_created) if not_created else None,
        "notUpdated": dict(not_updated) if not_updated else None,
        "notDestroyed": dict(not_destroyed) if not_destroyed else None,
    }
