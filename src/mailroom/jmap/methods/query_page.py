"""The page of a Foo/query and the diff of a Foo/queryChanges over an ordered list of ids.

For the types that compute their whole result list (Mailbox, EmailSubmission):
``position`` (negative counts from the end), ``anchor`` (an id or a
``#creationId``; ``anchorNotFound`` when it is not in the results) with
``anchorOffset``, ``limit`` (capped at ``maxQueryLimit``, the response then
says so) and ``calculateTotal`` (RFC 8620 §5.5), and ``removed``/``added``
with ``maxChanges`` (RFC 8620 §5.6).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import MethodError, invalid_arguments
from mailroom.jmap.methods.common import boolean, integer, max_changes, unsigned

__all__ = ["query_changes_response", "query_page"]


def query_page(
    context: Context,
    args: dict[str, Any],
    found: list[str],
    state: int,
    *,
    can_calculate_changes: bool = True,
) -> dict[str, Any]:
    """The Foo/query response for the ordered result ids ``found``."""
    position = integer(args, "position", 0)
    anchor = args.get("anchor")
    if anchor is not None:
        if not isinstance(anchor, str):
            raise invalid_arguments("anchor must be an id or null.")
        if anchor.startswith("#"):
            anchor = context.created_ids.get(anchor[1:], anchor)
        if anchor not in found:
            raise MethodError("anchorNotFound", "The anchor is not in the results.")
        position = max(0, found.index(anchor) + integer(args, "anchorOffset", 0))
    elif position < 0:
        position = max(0, len(found) + position)
    cap = context.limits.max_query_limit
    asked = args.get("limit")
    limit = min(unsigned(args, "limit", cap), cap)
    response: dict[str, Any] = {
        "accountId": context.account_id,
        "queryState": str(state),
        "canCalculateChanges": can_calculate_changes,
        "position": position,
        "ids": found[position : position + limit],
    }
    if boolean(args, "calculateTotal"):
        response["total"] = len(found)
    if asked is not None and asked > cap:
        response["limit"] = cap
    return response


def query_changes_response(
    context: Context,
    args: dict[str, Any],
    states: tuple[int, int],
    found: list[str],
    changed: Collection[str],
    removed: list[str],
) -> dict[str, Any]:
    """Foo/queryChanges from ``since`` to ``now`` (``states``): ``removed``, then ``added``.

    ``removed`` lists every id that may have left or moved; of those,
    ``changed`` are re-``added`` at their index when they are in ``found`` now.
    """
    limit = max_changes(args)
    up_to = args.get("upToId")
    if up_to is not None and not isinstance(up_to, str):
        raise invalid_arguments("upToId must be an id or null.")
    added = [{"id": value, "index": n} for n, value in enumerate(found) if value in changed]
    if limit is not None and len(removed) + len(added) > limit:
        raise MethodError("tooManyChanges", f"There are more than maxChanges ({limit}) changes.")
    since, now = states
    response: dict[str, Any] = {
        "accountId": context.account_id,
        "oldQueryState": str(since),
        "newQueryState": str(now),
        "removed": removed,
        "added": added,
    }
    if boolean(args, "calculateTotal"):
        response["total"] = len(found)
    return response
