"""The stored events of some messages of one user, read in one query.

Both the JMAP ``events`` property (:mod:`mailroom.events.email_events`) and the
thread page's event lines (:mod:`mailroom.web.event_lines`) read them here.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.store.models import MessageEvent


def events_of_messages(
    session: Session, user_id: int, message_ids: Sequence[int]
) -> list[MessageEvent]:
    """The events of these messages (of this user only), by message id, then position."""
    if not message_ids:
        return []
    return list(
        session.scalars(
            select(MessageEvent)
            .where(MessageEvent.user_id == user_id, MessageEvent.message_id.in_(list(message_ids)))
            .order_by(MessageEvent.message_id, MessageEvent.position)
        )
    )
