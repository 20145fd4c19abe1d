"""Catch-up: the assistant's verdict for mail it was never asked about.

Imported and old mail is never held and not asked about at ingest. Every
15 minutes (the runtime's duty) the newest never-asked mail of each owner
who switched the assistant on is queued on ``enrich_backlog`` — but only
once every account of that owner finished importing, and only while that
queue is empty: the empty queue is the whole state (a batch is queued, done,
and the next duty queues the next). ``messages.assistant_at`` is the
progress mark. Only mail whose tab a verdict could still change is picked
(:func:`~mailroom.assistant.hold.verdict_could_decide`, as for holding new mail:
not rule-filed, no Gmail label, not the owner's own, no correction or
correspondent), so the model is never asked a question whose answer stands.
The backlog task yields to live mail (:func:`mailroom.jobs.assistant`).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.assistant.config import owners_enabled
from mailroom.assistant.hold import verdict_could_decide
from mailroom.ingest.routing import every_account_imported
from mailroom.store.models import Message

INTERVAL = 15 * 60.0  # seconds between catch-up rounds
BATCH = 100  # messages queued per owner and round


def never_asked(session: Session, user_id: int, limit: int = BATCH) -> list[int]:
    """The owner's newest messages the model was never asked about and could re-sort."""
    return list(
        session.scalars(
            select(Message.id)
            .where(
                Message.user_id == user_id,
                Message.assistant_at.is_(None),
                verdict_could_decide(),
            )
            .order_by(Message.received_at.desc(), Message.id.desc())
            .limit(limit)
        )
    )


def catch_up_batches(session: Session, limit: int = BATCH) -> dict[int, list[int]]:
    """Per owner with the assistant on and every account imported: the mail to ask about."""
    found: dict[int, list[int]] = {}
    for user_id in owners_enabled(session):
        if not every_account_imported(session, user_id):
            continue
        ids = never_asked(session, user_id, limit)
        if ids:
            found[user_id] = ids
    return found
