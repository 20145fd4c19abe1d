"""Reading the stored header lists of messages (``message_bodies.headers``)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.store.models import MessageBody


def stored_headers(session: Session, message_ids: Collection[int]) -> dict[int, Any]:
    """Message id → its stored (name, value) header pairs, for the ids that have a body row."""
    if not message_ids:
        return {}
    rows = session.execute(
        select(MessageBody.message_id, MessageBody.headers).where(
            MessageBody.message_id.in_(list(message_ids))
        )
    )
    return {message_id: headers for message_id, headers in rows}
