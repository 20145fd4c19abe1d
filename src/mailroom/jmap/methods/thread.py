"""``Thread/get`` and ``Thread/changes`` (RFC 8621 §3).

A thread's ``emailIds`` are its messages oldest first. A thread emptied by
deletes is gone: ``notFound`` in ``/get``, ``destroyed`` in ``/changes``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.jmap import changes as jchanges
from mailroom.jmap import ids
from mailroom.jmap.changes import current_states
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.methods.common import (
    get_response,
    requested_ids,
    requested_properties,
    type_changes,
)
from mailroom.jmap.scope import owned_by
from mailroom.store.models import Message

PROPERTIES = ("id", "emailIds")


def thread_get(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Thread/get."""
    user_id = context.check_account(args)
    properties = requested_properties(args, PROPERTIES, PROPERTIES)
    wanted = requested_ids(context, args, required=True) or []
    state = current_states(session, user_id).thread
    parsed = {value: ids.parse_thread(value) for value in wanted}
    threads = [p[1] for p in parsed.values() if p is not None and p[0] == "T"]
    loose = [p[1] for p in parsed.values() if p is not None and p[0] == "TM"]
    members: dict[str, list[str]] = defaultdict(list)
    if threads:
        for mid, thread in session.execute(
            select(Message.id, Message.thread_id)
            .where(Message.thread_id.in_(threads), owned_by(Message.user_id, user_id))
            .order_by(Message.received_at, Message.id)
        ):
            members[ids.thread_id(thread, mid)].append(ids.email_id(mid))
    if loose:
        for (mid,) in session.execute(
            select(Message.id).where(
                Message.id.in_(loose),
                owned_by(Message.user_id, user_id),
                Message.thread_id.is_(None),
            )
        ):
            members[ids.thread_id(None, mid)].append(ids.email_id(mid))
    found: list[dict[str, Any]] = []
    missing: list[str] = []
    for value in wanted:
        if members.get(value):
            full = {"id": value, "emailIds": members[value]}
            found.append({name: full[name] for name in properties})
        else:
            missing.append(value)
    return get_response(context, state, found, missing)


def thread_changes(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Thread/changes."""
    return type_changes(
        context,
        session,
        args,
        floor_types=("Thread",),
        state=lambda states: states.thread,
        read=jchanges.thread_changes,
        to_id=lambda i: f"T{i}",
    )
