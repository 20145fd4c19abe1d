"""``Email/get`` (RFC 8621 §4.2): the user's emails, only the properties asked for."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.jmap import ids
from mailroom.jmap.bodies import BODY_PROPERTIES, DEFAULT_BODY_PROPERTIES
from mailroom.jmap.changes import current_states
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import MethodError
from mailroom.jmap.header_forms import header_property
from mailroom.jmap.methods.common import (
    EVENTS,
    TABS,
    boolean,
    get_response,
    requested_ids,
    requested_properties,
    unsigned,
)
from mailroom.jmap.methods.email_reader import (
    DEFAULT_PROPERTIES,
    PROPERTIES,
    TAB_PROPERTIES,
    EmailReader,
)
from mailroom.store.models import Message


def email_get(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Email/get."""
    user_id = context.check_account(args)
    tabs = TABS in context.using
    events = EVENTS in context.using  # `events` is asked for by name, never a default
    known = PROPERTIES | (TAB_PROPERTIES if tabs else frozenset())
    known |= frozenset({"events"}) if events else frozenset()
    properties = requested_properties(args, known, DEFAULT_PROPERTIES)
    body_properties = requested_properties(
        args, BODY_PROPERTIES, DEFAULT_BODY_PROPERTIES, key="bodyProperties"
    )
    for name in [*properties, *body_properties]:
        if name.startswith("header:"):
            header_property(name)  # invalidArguments for a bad name or a form not allowed
    state = current_states(session, user_id).email
    wanted = requested_ids(context, args)
    if wanted is None:
        newest = session.scalars(
            select(Message.id)
            .where(Message.user_id == user_id)
            .order_by(Message.id)
            .limit(context.limits.max_objects_in_get + 1)
        ).all()
        if len(newest) > context.limits.max_objects_in_get:
            raise MethodError("requestTooLarge", "Too many emails to get them all; give ids.")
        wanted = [ids.email_id(mid) for mid in newest]
    parsed = {value: ids.parse_email(value) for value in wanted}
    reader = EmailReader(session, user_id, tabs=tabs)
    objects = reader.read(
        [mid for mid in parsed.values() if mid is not None],
        properties,
        body_properties=None if args.get("bodyProperties") is None else body_properties,
        fetch_text=boolean(args, "fetchTextBodyValues"),
        fetch_html=boolean(args, "fetchHTMLBodyValues"),
        fetch_all=boolean(args, "fetchAllBodyValues"),
        max_bytes=unsigned(args, "maxBodyValueBytes", 0),
    )
    if "events" in properties:
        from mailroom.events.email_events import email_events

        for message_id, found_events in email_events(session, user_id, list(objects)).items():
            objects[message_id]["events"] = found_events
    found, missing = [], []
    for value, mid in parsed.items():
        if mid is not None and mid in objects:
            found.append(objects[mid])
        else:
            missing.append(value)
    return get_response(context, state, found, missing)
