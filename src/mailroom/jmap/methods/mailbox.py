"""``Mailbox/get`` and ``/changes`` (RFC 8621 §2.1, §2.2): labels as mailboxes.

Every label of the user is a mailbox (system labels carry their role, see
``jmap.mapping``); nested labels have their parent as ``parentId``;
``sortOrder`` and ``isSubscribed`` are the label's own columns. Counts come
from the trigger-kept ``thread_labels`` (totals) and one grouped query over
unread messages. ``myRights`` is exact per mailbox (:func:`rights`): system
mailboxes cannot be renamed, deleted or given children, and nothing can be
put into Snoozed over JMAP (a snooze needs a wake time). ``Mailbox/query`` is
in :mod:`~mailroom.jmap.methods.mailbox_query`, ``Mailbox/set`` in
:mod:`~mailroom.jmap.methods.mailbox_set`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from mailroom.jmap import changes as jchanges
from mailroom.jmap import ids
from mailroom.jmap.changes import current_states
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.mapping import JMAP_ROLE
from mailroom.jmap.methods.common import (
    get_response,
    requested_ids,
    requested_properties,
    type_changes,
)
from mailroom.store.models import Change, Label, Message, MessageLabel, ThreadLabel

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
SERVER_SET = frozenset({"id", "myRights"}) | COUNTS


def rights(label: Label) -> dict[str, bool]:
    """The ``myRights`` of a mailbox: what this user may do with it over JMAP."""
    user_label = label.role is None
    return {
        "mayReadItems": True,
        "mayAddItems": label.role != "snoozed",
        "mayRemoveItems": True,
        "maySetSeen": True,
        "maySetKeywords": True,
        "mayCreateChild": user_label,
        "mayRename": user_label,
        "mayDelete": user_label,
        "maySubmit": True,  # EmailSubmission sends any of the user's emails
    }


def mailbox_counts(session: Session, user_id: int) -> dict[int, dict[str, int]]:
    """Email and thread totals and unread counts per label of the user."""
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


def created_id(context: Context, value: object) -> object:
    """An id, with a creation id reference (``#new``) of this request replaced by its id."""
    if isinstance(value, str) and value.startswith("#"):
        return context.created_ids.get(value[1:], value)
    return value


def user_labels(session: Session, user_id: int) -> list[Label]:
    """Every label of the user, by id."""
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
        "sortOrder": label.sort_order,
        "myRights": rights(label),
        "isSubscribed": label.is_subscribed,
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
    labels = {label.id: label for label in user_labels(session, user_id)}
    counts = mailbox_counts(session, user_id) if COUNTS & set(properties) else {}
    if wanted is None:
        chosen = list(labels.values())
        missing: list[str] = []
    else:
        chosen, missing = [], []
        for value in wanted:
            label_id = ids.parse_mailbox(created_id(context, value))
            if label_id is not None and label_id in labels:
                chosen.append(labels[label_id])
            else:
                missing.append(value)
    found = [mailbox_object(label, counts.get(label.id), properties) for label in chosen]
    return get_response(context, state, found, missing)


def mailbox_changes(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Mailbox/changes; ``updatedProperties`` names the counts when only they can have changed.

    Emails entering, leaving or changing move only counts; any logged Mailbox
    change in the window (a name, parent, role, order, subscription, or a count
    change an operation logged) may be anything, so it is null then (RFC 8621 §2.2).
    """
    changes = type_changes(
        context,
        session,
        args,
        floor_types=("Mailbox", "Email"),
        state=lambda states: states.mailbox,
        read=jchanges.mailbox_changes,
        to_id=ids.mailbox_id,
    )
    only_counts = changes["updated"] and not session.scalar(
        select(Change.seq)
        .where(
            Change.user_id == context.principal.user_id,
            Change.type == "Mailbox",
            Change.seq > int(changes["oldState"]),
            Change.seq <= int(changes["newState"]),
        )
        .limit(1)
    )
    counts = [p for p in PROPERTIES if p in COUNTS]
    return {**changes, "updatedProperties": counts if only_counts else None}
