"""The ``create``, ``update`` and ``destroy`` arguments of a Foo/set (RFC 8620 §5.3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import MethodError, invalid_arguments


@dataclass(frozen=True, slots=True)
class SetArguments:
    """What a /set asks for, checked for shape and against maxObjectsInSet."""

    create: dict[str, dict[str, Any]]
    update: dict[str, dict[str, Any]]
    destroy: list[str]


def set_arguments(context: Context, args: dict[str, Any]) -> SetArguments:
    """Parse the three arguments; ``invalidArguments`` or ``requestTooLarge`` if they are wrong."""
    create = args.get("create") or {}
    update = args.get("update") or {}
    destroy = args.get("destroy") or []
    if not isinstance(create, dict) or not all(isinstance(v, dict) for v in create.values()):
        raise invalid_arguments("create must be an object of creation ids to objects.")
    if not isinstance(update, dict) or not all(isinstance(v, dict) for v in update.values()):
        raise invalid_arguments("update must be an object of ids to patch objects.")
    if not isinstance(destroy, list) or not all(isinstance(v, str) for v in destroy):
        raise invalid_arguments("destroy must be a list of ids.")
    most = context.limits.max_objects_in_set
    if len(create) + len(update) + len(destroy) > most:
        raise MethodError("requestTooLarge", f"At most maxObjectsInSet ({most}) objects per call.")
    return SetArguments(dict(create), dict(update), list(dict.fromkeys(destroy)))
