"""``Mailbox/get``, ``/changes``, ``/query`` (RFC 8621 §2): labels as mailboxes.

Every label of the user is a mailbox (system labels carry their role, see
``jmap.mapping``); nested labels have their parent as ``parentId``. Counts
come from the trigger-kept ``thread_labels`` (totals) and one grouped query
over unread messages. Mailboxes cannot be created, renamed or deleted over
JMAP yet (``myRights`` says so; ``Mailbox/set`` is unknown).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from mailroom.jmap import changes as jchanges
from mailroom.jmap import ids
from mailroom.jmap.changes import current_states
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import MethodError, invalid_arguments
from mailroom.jmap.mapping import JMAP_ROLE, MAILROOM_ROLE, SORT_ORDER, USER_LABEL_SORT_ORDER
from mailroom.jmap.methods.common import (
    boolean,
    get_response,
    integer,
    requested_ids,
    requested_properties,
    type_changes,
    unsigned,
)
from mailroom.store.models import Label, Message, MessageLabel, ThreadLabel

PROPERTIES = (
    "id",
    "name",
    "parentId",
    "role",
    "sortOrder",
    "totalEmails",
    "unreadEmails",
    "totalThreads",
    "unreadThreads",
    "myRights",
    "isSubscribed",
)
COUNTS = frozenset({"totalEmails", "unreadEmails", "totalThreads", "unreadThreads"})
RIGHTS = {
    "mayReadItems": True,
    "mayAddItems": True,
    "mayRemoveItems": True,
    "maySetSeen": True,
    "maySetKeywords": True,
    "mayCreateChild": False,
    "mayRename": False,
    "mayDelete": False,
    "maySubmit": False,
}


def _counts(session: Session, user_id: int) -> dict[int, dict[str, int]]:
    counts: dict[int, dict[str, int]] = {}
    for label_id, threads, emails in session.execute(
        select(ThreadLabel.label_id, func.count(), func.sum(ThreadLabel.message_count))
        .join(Label, Label.id == ThreadLabel.label_id)
        .where(Label.user_id == user_id, ThreadLabel.message_count > 0)
        .group_by(ThreadLabel.label_id)
    ):
        counts[label_id] = {
            "totalEmails": int(emails or 0),
            "totalThreads": int(threads),
            "unreadEmails": 0,
            "unreadThreads": 0,
        }
    for label_id, emails, threads in session.execute(
        select(
            MessageLabel.label_id,
            func.count(),
            func.count(func.distinct(func.coalesce(Message.thread_id, -Message.id))),
        )
        .join(Message, Message.id == MessageLabel.message_id)
        .where(Message.user_id == user_id, Message.seen_at.is_(None))
        .group_by(MessageLabel.label_id)
    ):
        entry = counts.setdefault(
            label_id, {"totalEmails": 0, "totalThreads": 0, "unreadEmails": 0, "unreadThreads": 0}
        )
        entry["unreadEmails"] = int(emails)
        entry["unreadThreads"] = int(threads)
    return counts


def _labels(session: Session, user_id: int) -> list[Label]:
    return list(session.scalars(select(Label).where(Label.user_id == user_id).order_by(Label.id)))


def mailbox_object(
    label: Label, counts: dict[str, int] | None, properties: list[str]
) -> dict[str, Any]:
    """One Mailbox object."""
    full: dict[str, Any] = {
        "id": ids.mailbox_id(label.id),
        "name": label.name,
        "parentId": ids.mailbox_id(label.parent_id) if label.parent_id else None,
        "role": JMAP_ROLE.get(label.role or ""),
        "sortOrder": SORT_ORDER.get(label.role or "", USER_LABEL_SORT_ORDER),
        "myRights": dict(RIGHTS),
        "isSubscribed": True,
    }
    zero = {"totalEmails": 0, "totalThreads": 0, "unreadEmails": 0, "unreadThreads": 0}
    full.update(counts or zero)
    return {name: full[name] for name in properties}


def mailbox_get(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Mailbox/get."""
    user_id = context.check_account(args)
    properties = requested_properties(args, PROPERTIES, PROPERTIES)
    wanted = requested_ids(context, args)
    state = current_states(session, user_id).mailbox
    labels = {label.id: label for label in _labels(session, user_id)}
    counts = _counts(session, user_id) if COUNTS & set(properties) else {}
    if wanted is None:
        chosen = list(labels.values())
        missing: list[str] = []
    else:
        chosen, missing = [], []
        for value in wanted:
            label_id = ids.parse_mailbox(value)
            if label_id is not None and label_id in labels:
                chosen.append(labels[label_id])
            else:
                missing.append(value)
    found = [mailbox_object(label, counts.get(label.id), properties) for label in chosen]
    return get_response(context, state, found, missing)


def mailbox_changes(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Mailbox/changes (``updatedProperties`` is null: any property may have changed)."""
    changes = type_changes(
        context,
        session,
        args,
        floor_types=("Mailbox", "Email"),
        state=lambda states: states.mailbox,
        read=jchanges.mailbox_changes,
        to_id=ids.mailbox_id,
    )
    return {**changes, "updatedProperties": None}


def _matches(label: Label, condition: dict[str, Any]) -> bool:
    for key, value in condition.items():
        if key == "parentId":
            if value is None:
                if label.parent_id is not None:
                    return False
            elif ids.parse_mailbox(value) != label.parent_id:
                return False
        elif key == "name":
            if not isinstance(value, str):
                raise invalid_arguments("name must be a string.")
            if value.lower() not in label.name.lower():
                return False
        elif key == "role":
            wanted = MAILROOM_ROLE.get(value) if isinstance(value, str) else None
            if value is None:
                if label.role is not None:
                    return False
            elif label.role != wanted:
                return False
        elif key == "hasAnyRole":
            if bool(label.role) != bool(value):
                return False
        elif key == "isSubscribed":
            if value is not True:
                return False
        else:
            raise MethodError("unsupportedFilter", f"The filter {key!r} is not supported.")
    return True


def _filter(label: Label, node: object) -> bool:
    if node is None:
        return True
    if not isinstance(node, dict):
        raise invalid_arguments("A filter must be an object.")
    if "operator" in node:
        conditions = node.get("conditions")
        if not isinstance(conditions, list):
            raise invalid_arguments("A FilterOperator needs a list of conditions.")
        results = [_filter(label, c) for c in conditions]
        operator = node["operator"]
        if operator == "AND":
            return all(results)
        if operator == "OR":
            return any(results)
        if operator == "NOT":
            return not any(results)
        raise invalid_arguments(f"Unknown filter operator {operator!r}.")
    return _matches(label, node)


def mailbox_query(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Mailbox/query: filter by parentId, name, role, hasAnyRole; sort by sortOrder or name."""
    user_id = context.check_account(args)
    state = current_states(session, user_id).mailbox
    labels = [label for label in _labels(session, user_id) if _filter(label, args.get("filter"))]
    sort = args.get("sort") or [{"property": "sortOrder"}, {"property": "name"}]
    if not isinstance(sort, list):
        raise invalid_arguments("sort must be a list of comparators.")
    for comparator in reversed(sort):
        if not isinstance(comparator, dict):
            raise invalid_arguments("A comparator must be an object.")
        prop = comparator.get("property")
        reverse = comparator.get("isAscending", True) is False
        if prop == "sortOrder":
            labels.sort(
                key=lambda lb: SORT_ORDER.get(lb.role or "", USER_LABEL_SORT_ORDER),
                reverse=reverse,
            )
        elif prop == "name":
            labels.sort(key=lambda lb: lb.name.lower(), reverse=reverse)
        else:
            raise MethodError("unsupportedSort", f"Sorting by {prop!r} is not supported.")
    found = [ids.mailbox_id(label.id) for label in labels]
    position = integer(args, "position", 0)
    if position < 0:
        position = max(0, len(found) + position)
    anchor = args.get("anchor")
    if anchor is not None:
        if anchor not in found:
            raise MethodError("anchorNotFound", "The anchor is not in the results.")
        position = max(0, found.index(anchor) + integer(args, "anchorOffset", 0))
    limit = unsigned(args, "limit", len(found))
    response: dict[str, Any] = {
        "accountId": context.account_id,
        "queryState": str(state),
        "canCalculateChanges": False,
        "position": position,
        "ids": found[position : position + limit],
    }
    if boolean(args, "calculateTotal"):
        response["total"] = len(found)
    return response


def mailbox_query_changes(
    context: Context, _session: Session, args: dict[str, Any]
) -> dict[str, Any]:
    """Mailbox/queryChanges: never calculable (the list is small; query again)."""
    context.check_account(args)
    raise MethodError("cannotCalculateChanges", "Mailbox queries are not diffed; query again.")
