"""``Mailbox/query`` and ``Mailbox/queryChanges`` (RFC 8621 §2.3, §2.4; RFC 8620 §5.5, §5.6).

A user has few mailboxes, so both load the user's labels and filter and sort
them in memory:

* filter conditions ``parentId`` (an id or null), ``name`` (case-insensitive
  substring), ``role`` (a role or null), ``hasAnyRole`` and ``isSubscribed``,
  nested in ``AND``/``OR``/``NOT`` (at most :data:`MAX_FILTER_DEPTH` deep);
  an unknown condition is ``unsupportedFilter``;
* sort ``sortOrder`` and ``name`` (under any collation of
  :mod:`mailroom.jmap.comparators`, which checks the comparators as it does
  for ``Email/query``), ties broken by the system mailboxes' usual order
  (Inbox first), then name, then id; no sort, or an empty one, is by
  ``sortOrder``;
* ``sortAsTree`` orders every parent before its children and each set of
  siblings by the comparators; ``filterAsTree`` keeps a mailbox only if all
  its ancestors match too.

The query state is the Mailbox state. ``Mailbox/queryChanges`` is exact: every
mailbox with a logged change since the state (name, parent, role, sortOrder,
isSubscribed, counts) is ``removed`` — unless it was created since — and
re-``added`` at its index when it is in the results now. With ``sortAsTree`` or
``filterAsTree`` the descendants of a changed mailbox go the same way, since
their place and inclusion follow their ancestors. Every filter and sort
property is mutable, so ``upToId`` is ignored (RFC 8620 §5.6).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from typing import Any

from sqlalchemy.orm import Session

from mailroom.jmap import ids
from mailroom.jmap.changes import current_states, parse_state
from mailroom.jmap.comparators import Comparator, SortRules, fold, parse_sort
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import MethodError, invalid_arguments
from mailroom.jmap.mapping import JMAP_ROLE, MAILROOM_ROLE, SORT_ORDER
from mailroom.jmap.methods.common import boolean, max_changes
from mailroom.jmap.methods.mailbox import created_id, user_labels
from mailroom.jmap.methods.query_page import query_changes_response, query_page
from mailroom.store import changelog
from mailroom.store.models import Label

MAX_FILTER_DEPTH = 20
CONDITIONS = frozenset({"parentId", "name", "role", "hasAnyRole", "isSubscribed"})
OPERATORS = frozenset({"AND", "OR", "NOT"})
MAILBOX_SORTS = SortRules(("sortOrder", "name"), (Comparator("sortOrder", ascending=True),))
_SYSTEM_LAST = 1000


def _check_filter(context: Context, node: object, depth: int = 0) -> Any:
    """The filter with creation ids resolved; invalidArguments or unsupportedFilter if wrong."""
    if depth > MAX_FILTER_DEPTH:
        raise MethodError(
            "unsupportedFilter", f"Filters nest at most {MAX_FILTER_DEPTH} operators here."
        )
    if not isinstance(node, dict):
        raise invalid_arguments("A filter must be an object.")
    if "operator" in node:
        if set(node) != {"operator", "conditions"}:
            raise invalid_arguments("A FilterOperator has only operator and conditions.")
        if node["operator"] not in OPERATORS:
            raise invalid_arguments(f"Unknown filter operator {node['operator']!r}.")
        conditions = node["conditions"]
        if not isinstance(conditions, list):
            raise invalid_arguments("A FilterOperator needs a list of conditions.")
        return {
            "operator": node["operator"],
            "conditions": [_check_filter(context, c, depth + 1) for c in conditions],
        }
    unknown = sorted(set(node) - CONDITIONS)
    if unknown:
        raise MethodError("unsupportedFilter", f"The filter {unknown[0]!r} is not supported.")
    checked = dict(node)
    if "parentId" in node:
        value = created_id(context, node["parentId"])
        if value is not None and not isinstance(value, str):
            raise invalid_arguments("parentId must be a mailbox id or null.")
        checked["parentId"] = value
    if "name" in node and not isinstance(node["name"], str):
        raise invalid_arguments("name must be a string.")
    if "role" in node and node["role"] is not None and not isinstance(node["role"], str):
        raise invalid_arguments("role must be a string or null.")
    for key in ("hasAnyRole", "isSubscribed"):
        if key in node and not isinstance(node[key], bool):
            raise invalid_arguments(f"{key} must be true or false.")
    return checked


def _condition(label: Label, condition: dict[str, Any]) -> bool:
    if "parentId" in condition:
        wanted = condition["parentId"]
        if wanted is None:
            if label.parent_id is not None:
                return False
        elif ids.parse_mailbox(wanted) != label.parent_id or label.parent_id is None:
            return False
    if "name" in condition and condition["name"].casefold() not in label.name.casefold():
        return False
    if "role" in condition:
        role = condition["role"]
        if role is None:
            if label.role is not None:
                return False
        elif label.role is None or MAILROOM_ROLE.get(role) != label.role:
            return False
    if "hasAnyRole" in condition and (label.role in JMAP_ROLE) != condition["hasAnyRole"]:
        return False
    return not ("isSubscribed" in condition and label.is_subscribed != condition["isSubscribed"])


def _matches(label: Label, node: dict[str, Any]) -> bool:
    if "operator" not in node:
        return _condition(label, node)
    results = (_matches(label, c) for c in node["conditions"])
    if node["operator"] == "AND":
        return all(results)
    if node["operator"] == "OR":
        return any(results)
    return not any(results)


def _compare(comparators: list[Comparator]) -> Any:
    def compare(a: Label, b: Label) -> int:
        for comparator in comparators:
            left: Any = _key(a, comparator)  # both ints or both strings
            right: Any = _key(b, comparator)
            if left != right:
                return (-1 if left < right else 1) * (1 if comparator.ascending else -1)
        return (_tie(a) > _tie(b)) - (_tie(a) < _tie(b))

    return functools.cmp_to_key(compare)


def _key(label: Label, comparator: Comparator) -> int | str:
    if comparator.property == "sortOrder":
        return label.sort_order
    return fold(label.name, comparator.collation)


def _tie(label: Label) -> tuple[int, str, int]:
    return (SORT_ORDER.get(label.role or "", _SYSTEM_LAST), label.name.casefold(), label.id)


def _ancestors_match(label: Label, by_id: dict[int, Label], matched: set[int]) -> bool:
    seen: set[int] = set()
    parent = label.parent_id
    while parent is not None and parent not in seen:
        if parent not in matched:
            return False
        seen.add(parent)
        parent = by_id[parent].parent_id if parent in by_id else None
    return True


def _tree_order(labels: list[Label], key: Any) -> list[Label]:
    """Every label, parents before children, siblings in comparator order (depth-first)."""
    by_id = {label.id: label for label in labels}
    children: dict[int | None, list[Label]] = defaultdict(list)
    for label in labels:
        parent = label.parent_id if label.parent_id in by_id else None
        children[parent].append(label)
    ordered: list[Label] = []
    stack = sorted(children[None], key=key, reverse=True)
    while stack:
        label = stack.pop()
        ordered.append(label)
        stack.extend(sorted(children[label.id], key=key, reverse=True))
    return ordered


def run_query(context: Context, session: Session, user_id: int, args: dict[str, Any]) -> list[str]:
    """The ids of the user's mailboxes that match ``filter``, in ``sort`` order."""
    node = args.get("filter")
    checked = None if node is None else _check_filter(context, node)
    key = _compare(parse_sort(args.get("sort"), MAILBOX_SORTS))
    as_tree = boolean(args, "sortAsTree")
    filter_as_tree = boolean(args, "filterAsTree")
    labels = user_labels(session, user_id)
    matched = {lb.id for lb in labels if checked is None or _matches(lb, checked)}
    if filter_as_tree:
        by_id = {lb.id: lb for lb in labels}
        matched = {i for i in matched if _ancestors_match(by_id[i], by_id, matched)}
    ordered = _tree_order(labels, key) if as_tree else sorted(labels, key=key)
    return [ids.mailbox_id(lb.id) for lb in ordered if lb.id in matched]


def mailbox_query(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Mailbox/query (module docstring)."""
    user_id = context.check_account(args)
    state = current_states(session, user_id).mailbox
    return query_page(context, args, run_query(context, session, user_id, args), state)


def mailbox_query_changes(
    context: Context, session: Session, args: dict[str, Any]
) -> dict[str, Any]:
    """Mailbox/queryChanges (module docstring): removed and added since ``sinceQueryState``."""
    user_id = context.check_account(args)
    states = current_states(session, user_id)
    since = parse_state(
        args.get("sinceQueryState"), states.floor("Mailbox", "Email"), states.mailbox
    )
    max_changes(args)
    found = run_query(context, session, user_id, args)
    folded = changelog.changes_since(session, user_id, "Mailbox", since)
    touched = set(folded.updated)
    if boolean(args, "sortAsTree") or boolean(args, "filterAsTree"):
        touched |= _descendants(user_labels(session, user_id), touched)
    removed = [ids.mailbox_id(i) for i in sorted(touched | set(folded.destroyed))]
    again = {ids.mailbox_id(i) for i in touched | set(folded.created)}
    return query_changes_response(context, args, (since, states.mailbox), found, again, removed)


def _descendants(labels: list[Label], roots: set[int]) -> set[int]:
    children: dict[int, list[int]] = defaultdict(list)
    for label in labels:
        if label.parent_id is not None:
            children[label.parent_id].append(label.id)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children[todo.pop()]:
            if child not in found:
                found.add(child)
                todo.append(child)
    return found
