"""The one releaser: ending a hold, whichever of the three things ends it.

The verdict (:mod:`.classify`), the delayed release job (``release`` queue,
enqueued with ``hold_max_seconds`` delay at the moment of holding) and the
once-a-minute sweep all end a hold here. Releasing stamps
``category_released_at`` on the messages still held (so a second releaser
finds nothing and changes nothing), then derives their threads' tabs again:
a message released without a verdict shows under the cascade's tab, written
at ingest for exactly this. The threads whose tab changed are recorded as
JMAP Thread updates and the messages as Email updates, so open pages and
push clients learn of them.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from mailroom.assistant.hold import held_condition
from mailroom.conversations.refresh import refresh_categories
from mailroom.store import changelog
from mailroom.store.chunks import in_chunks
from mailroom.store.models import Message

SWEEP_LIMIT = 500  # held messages one sweep releases (the next sweep takes the rest)


def release(session: Session, message_ids: Collection[int], now: datetime) -> list[int]:
    """End the hold of those of these messages still held; returns the released ids."""
    released: dict[int, list[tuple[int, int | None]]] = {}
    for chunk in in_chunks(sorted(set(message_ids))):
        rows = session.execute(
            select(Message.id, Message.user_id, Message.thread_id).where(
                Message.id.in_(chunk), held_condition()
            )
        ).all()
        if not rows:
            continue
        session.execute(
            update(Message)
            .where(Message.id.in_([r.id for r in rows]), held_condition())
            .values(category_released_at=now)
        )
        for row in rows:
            released.setdefault(row.user_id, []).append((row.id, row.thread_id))
    done: list[int] = []
    for user_id, pairs in released.items():
        ids = sorted(mid for mid, _ in pairs)
        threads = sorted({tid for _, tid in pairs if tid is not None})
        changed = refresh_categories(session, threads)
        changelog.record(session, user_id, "Email", ids, "updated")
        changelog.record(session, user_id, "Thread", changed, "updated")
        done += ids
    return sorted(done)


def overdue(session: Session, now: datetime, hold_max_seconds: int) -> list[int]:
    """Messages held longer than ``hold_max_seconds`` (what the sweep releases)."""
    cutoff = now - timedelta(seconds=hold_max_seconds)
    return list(
        session.scalars(
            select(Message.id)
            .where(held_condition(), Message.category_held_at <= cutoff)
            .order_by(Message.category_held_at)
            .limit(SWEEP_LIMIT)
        )
    )


def still_held(session: Session, message_ids: Collection[int]) -> list[int]:
    """Those of these messages that are held now."""
    found: list[int] = []
    for chunk in in_chunks(sorted(set(message_ids))):
        found += session.scalars(select(Message.id).where(Message.id.in_(chunk), held_condition()))
    return sorted(found)
