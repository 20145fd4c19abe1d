"""Carrying operations to providers: the outbox consumer.

State machine of an outbox row::

    pending --propagator ok--> done
    pending --error--> pending (attempts + 1, next_attempt_at = now + backoff)
    pending --error, attempts >= MAX_ATTEMPTS--> failed

Propagators must be idempotent (replaying an entry changes nothing at the
provider): they derive the provider state from the message's *current*
labels and flags, not from the delta in the payload. Until an entry is
``done``, a sync that reads the older provider state must not revert the
local change — ``pending_message_ids`` tells it which messages to leave
alone.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.store.engine import Store
from mailroom.store.models import OutboxEntry, utcnow

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 8
BATCH = 100


class Propagator(Protocol):
    """Carries one outbox entry to the provider of its account; must be idempotent."""

    def propagate(self, session: Session, entry: OutboxEntry) -> None:
        """Make the provider match the message's current state (or delete it)."""


class LocalPropagator:
    """Local-only accounts have no provider: every entry is done at once."""

    def propagate(self, session: Session, entry: OutboxEntry) -> None:
        """Nothing to carry anywhere."""


def pending_message_ids(session: Session, message_ids: Iterable[int]) -> set[int]:
    """Those of ``message_ids`` with a change the provider has not acknowledged yet."""
    ids = list(message_ids)
    if not ids:
        return set()
    rows = session.scalars(
        select(OutboxEntry.message_id)
        .where(OutboxEntry.message_id.in_(ids), OutboxEntry.state == "pending")
        .distinct()
    )
    return {mid for mid in rows if mid is not None}


def backoff(attempts: int) -> timedelta:
    """Delay before the next try: 30 s doubling, at most one hour."""
    return timedelta(seconds=min(30 * 2 ** max(attempts - 1, 0), 3600))


def propagate_pending(
    store: Store,
    account_id: int,
    propagator: Propagator,
    now: datetime | None = None,
) -> tuple[int, int]:
    """Carry every due pending entry of one account, oldest first; returns (done, failed).

    Each entry commits on its own, so a crash repeats at most one entry,
    which idempotent propagators make harmless.
    """
    moment = now or utcnow()
    with store.session() as session:
        due = list(
            session.scalars(
                select(OutboxEntry.id)
                .where(
                    OutboxEntry.account_id == account_id,
                    OutboxEntry.state == "pending",
                    OutboxEntry.next_attempt_at <= moment,
                )
                .order_by(OutboxEntry.id)
                .limit(BATCH)
            )
        )
    done = failed = 0
    for entry_id in due:
        with store.session() as session:
            entry = session.get(OutboxEntry, entry_id)
            if entry is None or entry.state != "pending":
                continue
            try:
                propagator.propagate(session, entry)
            except Exception as exc:  # any provider failure is retried, then parked
                session.rollback()
                entry = session.get(OutboxEntry, entry_id)
                assert entry is not None
                entry.attempts += 1
                entry.last_error = str(exc)[:2000]
                if entry.attempts >= MAX_ATTEMPTS:
                    entry.state = "failed"
                    failed += 1
                    log.warning("Giving up propagating outbox entry %s: %s", entry_id, exc)
                else:
                    entry.next_attempt_at = moment + backoff(entry.attempts)
                continue
            entry.state, entry.done_at = "done", utcnow()
            done += 1
    return done, failed
