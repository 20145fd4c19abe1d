"""``Email/changes`` (RFC 8621 §4.3), from the change log."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from mailroom.jmap import changes as jchanges
from mailroom.jmap import ids
from mailroom.jmap.changes import current_states, parse_state
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.methods.common import changes_response, max_changes


def email_changes(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Email/changes."""
    user_id = context.check_account(args)
    limit = max_changes(args)
    states = current_states(session, user_id)
    since = parse_state(args.get("sinceState"), states.floor("Email"), states.email)
    changes = jchanges.email_changes(session, user_id, since, limit)
    return changes_response(context, since, changes, ids.email_id)
