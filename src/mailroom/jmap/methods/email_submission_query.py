"""EmailSubmission/query and /queryChanges (RFC 8621 §7.3, §7.4), in SQL.

Filter conditions (in ``AND``/``OR``/``NOT``, at most 20 deep): ``identityIds``,
``emailIds`` (``#creationId`` references allowed), ``threadIds`` (lists of ids),
``undoStatus`` (``pending``, ``final``, ``canceled``), ``before`` (``sendAt`` <
date) and ``after`` (``sendAt`` >= date). Sorts: ``emailId``, ``threadId``,
``sentAt`` (the ``sendAt`` property, as RFC 8621 names the sort), ascending
or descending; ties and no sort go by ``sendAt`` then id.

The query state is the EmailSubmission state. ``queryChanges`` reports every
submission changed since in ``removed`` (unless created since) and re-adds
those in the results at their index. A thread merge moves a submission's
``threadId`` without an EmailSubmission change, so a query filtering or
sorting by thread says ``canCalculateChanges: false`` and its
``queryChanges`` is ``cannotCalculateChanges``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import and_, false, not_, or_, true
from sqlalchemy.orm import Session
from sqlalchemy.sql import ColumnElement

from mailroom.jmap import ids
from mailroom.jmap.changes import parse_state
from mailroom.jmap.comparators import Comparator, SortRules, parse_sort
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import MethodError, invalid_arguments
from mailroom.jmap.methods.common import parse_utc_date
from mailroom.jmap.methods.object_state import floor_of, state_of
from mailroom.jmap.methods.query_page import query_changes_response, query_page
from mailroom.jmap.submission_objects import UNDO_STATES, owned_submissions
from mailroom.outbound.queueing import CHANGE_TYPE
from mailroom.store import changelog
from mailroom.store.models import Message, Submission

__all__ = ["submission_query", "submission_query_changes"]

MAX_FILTER_DEPTH = 20
OPERATORS = frozenset({"AND", "OR", "NOT"})
CONDITIONS = frozenset({"identityIds", "emailIds", "threadIds", "undoStatus", "before", "after"})
SORTS = SortRules(("emailId", "threadId", "sentAt"), (Comparator("sentAt", ascending=True),))
_COLUMNS = {"emailId": Submission.email_id, "threadId": Message.thread_id}


def _id_list(
    context: Context, value: object, name: str, parse: Callable[[object], Any]
) -> list[Any]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise invalid_arguments(f"{name} must be a list of ids.")
    resolved = [context.created_ids.get(v[1:], v) if v.startswith("#") else v for v in value]
    return [parsed for parsed in map(parse, resolved) if parsed is not None]


def _thread_match(wanted: list[tuple[str, int]]) -> ColumnElement[bool]:
    threads = [number for kind, number in wanted if kind == "T"]
    alone = [number for kind, number in wanted if kind == "TM"]
    return or_(
        Message.thread_id.in_(threads),
        and_(Message.thread_id.is_(None), Submission.email_id.in_(alone)),
    )


def _condition(context: Context, node: dict[str, Any]) -> ColumnElement[bool]:
    unknown = sorted(set(node) - CONDITIONS)
    if unknown:
        raise MethodError("unsupportedFilter", f"The filter {unknown[0]!r} is not supported.")
    clauses: list[ColumnElement[bool]] = []
    if "identityIds" in node:
        wanted = _id_list(context, node["identityIds"], "identityIds", ids.parse_identity)
        clauses.append(Submission.identity_id.in_(wanted))
    if "emailIds" in node:
        wanted = _id_list(context, node["emailIds"], "emailIds", ids.parse_email)
        clauses.append(Submission.email_id.in_(wanted))
    if "threadIds" in node:
        clauses.append(
            _thread_match(_id_list(context, node["threadIds"], "threadIds", ids.parse_thread))
        )
    if "undoStatus" in node:
        status = node["undoStatus"]
        states = UNDO_STATES.get(status) if isinstance(status, str) else None
        if states is None:
            raise invalid_arguments('undoStatus is "pending", "final" or "canceled".')
        clauses.append(Submission.state.in_(states))
    if "before" in node:
        clauses.append(Submission.send_at < parse_utc_date(node["before"], "before"))
    if "after" in node:
        clauses.append(Submission.send_at >= parse_utc_date(node["after"], "after"))
    return and_(true(), *clauses)


def _where(context: Context, node: object, depth: int = 0) -> ColumnElement[bool]:
    """The SQL condition of a filter; invalidArguments or unsupportedFilter when it is wrong."""
    if depth > MAX_FILTER_DEPTH:
        raise MethodError(
            "unsupportedFilter", f"Filters nest at most {MAX_FILTER_DEPTH} operators here."
        )
    if not isinstance(node, dict):
        raise invalid_arguments("A filter must be an object.")
    if "operator" not in node:
        return _condition(context, node)
    if set(node) != {"operator", "conditions"} or node["operator"] not in OPERATORS:
        raise invalid_arguments("A FilterOperator is AND, OR or NOT with a list of conditions.")
    if not isinstance(node["conditions"], list):
        raise invalid_arguments("A FilterOperator needs a list of conditions.")
    parts = [_where(context, c, depth + 1) for c in node["conditions"]]
    if node["operator"] == "AND":
        return and_(true(), *parts)
    anyone = or_(false(), *parts)
    return anyone if node["operator"] == "OR" else not_(anyone)


def _mentions_threads(node: object) -> bool:
    if not isinstance(node, dict):
        return False
    if "operator" in node:
        return any(_mentions_threads(c) for c in node.get("conditions") or [])
    return "threadIds" in node


def _run(context: Context, session: Session, user_id: int, args: dict[str, Any]) -> list[str]:
    """The ids of the user's submissions that match, in sort order."""
    comparators = parse_sort(args.get("sort"), SORTS)
    query = owned_submissions(user_id, Submission.id)
    node = args.get("filter")
    if node is not None:
        query = query.where(_where(context, node))
    order = []
    for comparator in comparators:
        column = _COLUMNS.get(comparator.property, Submission.send_at)
        # Without an email (or a thread) first when ascending, the same on both stores.
        order.append(
            column.asc().nulls_first() if comparator.ascending else column.desc().nulls_last()
        )
    query = query.order_by(*order, Submission.send_at, Submission.id)
    return [ids.submission_id(number) for number in session.scalars(query)]


def _by_thread(args: dict[str, Any]) -> bool:
    """Whether the query depends on threads, which change without a submission change."""
    sort = args.get("sort")
    sorts_threads = isinstance(sort, list) and any(
        isinstance(c, dict) and c.get("property") == "threadId" for c in sort
    )
    return sorts_threads or _mentions_threads(args.get("filter"))


def submission_query(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """EmailSubmission/query (module docstring)."""
    user_id = context.check_account(args)
    state = state_of(session, user_id, CHANGE_TYPE)
    found = _run(context, session, user_id, args)
    return query_page(context, args, found, state, can_calculate_changes=not _by_thread(args))


def submission_query_changes(
    context: Context, session: Session, args: dict[str, Any]
) -> dict[str, Any]:
    """EmailSubmission/queryChanges (module docstring)."""
    user_id = context.check_account(args)
    current = state_of(session, user_id, CHANGE_TYPE)
    floor = floor_of(session, user_id, CHANGE_TYPE)
    since = parse_state(args.get("sinceQueryState"), floor, current)
    found = _run(context, session, user_id, args)
    if _by_thread(args):
        raise MethodError(
            "cannotCalculateChanges", "A query by thread cannot be updated; query it again."
        )
    folded = changelog.changes_since(session, user_id, CHANGE_TYPE, since)
    removed = [ids.submission_id(i) for i in sorted(set(folded.updated) | set(folded.destroyed))]
    again = {ids.submission_id(i) for i in folded.updated + folded.created}
    return query_changes_response(context, args, (since, current), found, again, removed)
