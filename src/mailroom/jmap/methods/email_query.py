"""``Email/query`` and ``Email/queryChanges`` (RFC 8621 §4.4-4.5).

The filter compiler and the paged search are :mod:`mailroom.jmap.emailquery`;
this module reads the method arguments and shapes the responses.
``queryChanges`` removes every changed email (and every email of a changed
thread) and re-adds it where it now is: exact for every filter and sort.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.jmap import changes as jchanges
from mailroom.jmap import ids
from mailroom.jmap.changes import current_states, parse_state
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.emailquery import EmailFilter, EmailSearch, is_immutable, parse_comparators
from mailroom.jmap.errors import MethodError, invalid_arguments
from mailroom.jmap.mapping import role_labels
from mailroom.jmap.methods.common import TABS, boolean, integer, is_int, max_changes
from mailroom.jmap.scope import owned_by
from mailroom.store.models import Message


def _search(context: Context, session: Session, user_id: int, args: dict[str, Any]) -> EmailSearch:
    compiler = EmailFilter(
        session, user_id, role_labels(session, user_id), tabs=TABS in context.using
    )
    condition = compiler.compile(args.get("filter"))
    return EmailSearch(
        session,
        compiler,
        condition,
        comparators=parse_comparators(args.get("sort")),
        collapse=boolean(args, "collapseThreads"),
        user_id=user_id,
    )


def email_query(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Email/query."""
    user_id = context.check_account(args)
    state = current_states(session, user_id).query
    search = _search(context, session, user_id, args)
    position = integer(args, "position", 0)
    anchor_value = args.get("anchor")
    anchor: int | None = None
    if anchor_value is not None:  # RFC 8620 §5.5: with an anchor, position is ignored
        if not isinstance(anchor_value, str):
            raise invalid_arguments("anchor must be an Email id.")
        anchor = ids.parse_email(anchor_value)
        if anchor is None:
            raise MethodError("anchorNotFound", "The anchor is not in the results.")
    cap = context.limits.max_query_limit
    asked = args.get("limit")
    if asked is not None and not is_int(asked, minimum=0):
        raise invalid_arguments("limit must be an unsigned integer (at most 2^53-1).")
    limit = cap if asked is None else min(asked, cap)
    want_total = boolean(args, "calculateTotal")
    result = search.page(
        position=position,
        anchor=anchor,
        anchor_offset=integer(args, "anchorOffset", 0),
        limit=limit,
        want_total=want_total,
    )
    response: dict[str, Any] = {
        "accountId": context.account_id,
        "queryState": str(state),
        "canCalculateChanges": True,
        "position": result.position,
        "ids": [ids.email_id(i) for i in result.ids],
    }
    if want_total:
        response["total"] = result.total
    if asked is None or asked > cap:
        response["limit"] = limit
    return response


def _affected(session: Session, user_id: int, since: int) -> set[int]:
    """Emails changed since the state, and every email of a thread changed since then."""
    emails, threads = jchanges.query_changes(session, user_id, since)
    if emails:
        threads |= {
            t
            for t in session.scalars(
                select(Message.thread_id).where(
                    Message.id.in_(emails), owned_by(Message.user_id, user_id)
                )
            )
            if t is not None
        }
    affected = set(emails)
    if threads:
        affected |= set(
            session.scalars(
                select(Message.id).where(
                    Message.thread_id.in_(threads), owned_by(Message.user_id, user_id)
                )
            )
        )
    return affected


def _up_to(args: dict[str, Any]) -> int | None:
    value = args.get("upToId")
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid_arguments("upToId must be an Email id or null.")
    return ids.parse_email(value)


def email_query_changes(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Email/queryChanges: every changed email is removed, and re-added where it now is.

    With ``upToId`` on a filter and sort of immutable properties only, the
    results are read only as far as that email, unless it changed itself.
    """
    user_id = context.check_account(args)
    if not isinstance(args.get("sinceQueryState"), str):
        raise invalid_arguments("sinceQueryState is required: the queryState of an Email/query.")
    limit = max_changes(args)
    states = current_states(session, user_id)
    since = parse_state(args.get("sinceQueryState"), states.floor("Email", "Thread"), states.query)
    search = _search(context, session, user_id, args)
    up_to = _up_to(args)
    affected = _affected(session, user_id, since)
    removed = [ids.email_id(mid) for mid in sorted(affected)]
    if limit is not None and len(removed) > limit:
        raise MethodError("tooManyChanges", "More changes than maxChanges; query again.")
    want_total = boolean(args, "calculateTotal")
    last = up_to if is_immutable(search.compiler, search.comparators) else None
    if last in affected:
        last = None
    current = search.ids_up_to(last) if affected or want_total else []
    added = [
        {"id": ids.email_id(mid), "index": index}
        for index, mid in enumerate(current)
        if mid in affected
    ]
    if limit is not None and len(removed) + len(added) > limit:
        raise MethodError("tooManyChanges", "More changes than maxChanges; query again.")
    response: dict[str, Any] = {
        "accountId": context.account_id,
        "oldQueryState": str(since),
        "newQueryState": str(states.query),
        "removed": removed,
        "added": added,
    }
    if want_total:
        stopped = last is not None and bool(current) and current[-1] == last
        response["total"] = search.total() if stopped else len(current)
    return response
