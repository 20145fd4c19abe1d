"""``Email/changes`` (RFC 8621 §4.3), from the change log."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from mailroom.jmap import changes as jchanges
from mailroom.jmap import ids
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.methods.common import type_changes


def email_changes(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Email/changes."""
    return type_changes(
        context,
        session,
        args,
        floor_types=("Email",),
        state=lambda states: states.email,
        read=jchanges.email_changes,
        to_id=ids.email_id,
    )
