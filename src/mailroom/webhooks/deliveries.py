"""Deliveries: claimed under a lease, retried with backoff and jitter, dead-lettered, replayed.

State of one delivery (``webhook_deliveries.state``)::

    pending ──2xx──────────────▶ delivered
       │ ▲
       │ └─ other answer / no answer: attempts + 1, next attempt after
       │    backoff(attempts) (30 s doubling to 6 h, jitter ±25 %)
       ├──10th failed attempt──▶ dead ──replay──▶ pending (attempts 0)
       └──410 Gone─────────────▶ dead, and the endpoint is disabled

A worker claims due deliveries of active endpoints in one guarded UPDATE
(``FOR UPDATE SKIP LOCKED`` on PostgreSQL; SQLite has one writer, so the
guarded UPDATE alone is enough) that writes a lease token and
``leased_until``; every outcome is written only while that token is still
the delivery's, so two workers never both settle one delivery. A worker
killed mid-delivery leaves a lease that runs out after :data:`LEASE`; the
delivery is then due again and another worker sends it — never lost, at the
price of a second POST of an event the receiver may already have (receivers
are idempotent per event id). The lease is longer than any POST may take
(:data:`mailroom.webhooks.worker.TIMEOUT`).
"""

from __future__ import annotations

import random
import secrets as _random
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from mailroom.errors import ConfigError, NotFoundError
from mailroom.store.engine import Store
from mailroom.store.models import WebhookDelivery, WebhookEndpoint
from mailroom.webhooks.endpoints import get_endpoint
from mailroom.webhooks.events import PING, Event
from mailroom.webhooks.sealed_bodies import opened_bodies

__all__ = [
    "BASE_DELAY",
    "LEASE",
    "MAX_ATTEMPTS",
    "MAX_DELAY",
    "Claim",
    "backoff",
    "claim_due",
    "make_ping",
    "replay",
    "replay_all_dead",
    "settle",
]

MAX_ATTEMPTS = 10
BASE_DELAY = timedelta(seconds=30)
MAX_DELAY = timedelta(hours=6)
LEASE = timedelta(minutes=2)
JITTER = 0.25
_ERROR_LENGTH = 500


def backoff(attempts: int, rng: random.Random) -> timedelta:
    """The pause after the ``attempts``-th failed attempt: 30 s doubling, at most 6 h, jittered."""
    pause = BASE_DELAY.total_seconds() * 2 ** max(attempts - 1, 0)
    pause = min(pause, MAX_DELAY.total_seconds())
    jittered = pause * (1 - JITTER + 2 * JITTER * rng.random())
    return timedelta(seconds=min(jittered, MAX_DELAY.total_seconds()))


@dataclass(frozen=True)
class Claim:
    """A delivery this worker holds the lease of."""

    id: int
    endpoint_id: int
    event_id: str
    body: str
    attempts: int
    token: str


def claim_due(store: Store, now: datetime, limit: int, *, only: int | None = None) -> list[Claim]:
    """Lease up to ``limit`` due deliveries of active endpoints (``only``: that one alone)."""
    free = or_(WebhookDelivery.leased_until.is_(None), WebhookDelivery.leased_until <= now)
    due = (
        select(WebhookDelivery.id)
        .where(
            WebhookDelivery.state == "pending",
            WebhookDelivery.next_attempt_at <= now,
            free,
            WebhookDelivery.endpoint_id.in_(
                select(WebhookEndpoint.id).where(WebhookEndpoint.active.is_(True))
            ),
        )
        .order_by(WebhookDelivery.next_attempt_at, WebhookDelivery.id)
        .limit(limit)
    )
    if only is not None:
        due = due.where(WebhookDelivery.id == only)
    token = _random.token_hex(16)
    with store.session() as session:
        if session.get_bind().dialect.name == "postgresql":
            due = due.with_for_update(skip_locked=True)
        rows = session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id.in_(due), WebhookDelivery.state == "pending", free)
            .values(lease_token=token, leased_until=now + LEASE)
            .returning(
                WebhookDelivery.id,
                WebhookDelivery.endpoint_id,
                WebhookDelivery.event_id,
                WebhookDelivery.body,
                WebhookDelivery.attempts,
            )
            .execution_options(synchronize_session=False)
        ).all()
        bodies = opened_bodies(session, {row.id: (row.endpoint_id, row.body) for row in rows})
    return [
        Claim(row.id, row.endpoint_id, row.event_id, bodies[row.id], row.attempts, token)
        for row in sorted(rows, key=lambda row: row.id)
    ]


def settle(
    store: Store,
    claim: Claim,
    code: int | None,
    error: str | None,
    now: datetime,
    rng: random.Random,
) -> str:
    """Write the outcome of one attempt while the lease is still ours; the new state."""
    values: dict[str, Any] = {"lease_token": None, "leased_until": None, "last_code": code}
    disable = False
    if code is not None and 200 <= code < 300:
        values.update(state="delivered", delivered_at=now, last_error=None)
    elif code == 410:
        reason = "The endpoint answered 410 Gone, so it was disabled."
        values.update(state="dead", attempts=claim.attempts + 1, last_error=reason)
        disable = True
    else:
        attempts = claim.attempts + 1
        why = error or f"The endpoint answered HTTP {code}."
        values.update(attempts=attempts, last_error=why[:_ERROR_LENGTH])
        if attempts >= MAX_ATTEMPTS:
            values.update(state="dead")
        else:
            values.update(next_attempt_at=now + backoff(attempts, rng))
    with store.session() as session:
        result = session.execute(
            update(WebhookDelivery)
            .where(
                WebhookDelivery.id == claim.id,
                WebhookDelivery.lease_token == claim.token,
                WebhookDelivery.state == "pending",
            )
            .values(**values)
        )
        if not result.rowcount:  # type: ignore[attr-defined]
            return "lost"  # the lease ran out and another worker took the delivery
        if disable:
            session.execute(
                update(WebhookEndpoint)
                .where(WebhookEndpoint.id == claim.endpoint_id)
                .values(active=False, disabled_reason=values["last_error"])
            )
    return str(values.get("state", "pending"))


_AGAIN = {"state": "pending", "attempts": 0, "lease_token": None, "leased_until": None}


def replay(session: Session, delivery_id: int, now: datetime) -> None:
    """Send a delivered or dead delivery again, as if new (same event id, same body)."""
    delivery = session.get(WebhookDelivery, delivery_id)
    if delivery is None:
        raise NotFoundError(f"There is no webhook delivery with id {delivery_id}.")
    if delivery.state == "pending":
        raise ConfigError(f"Webhook delivery {delivery_id} is still being delivered.")
    _require_active(session, delivery.endpoint_id)
    session.execute(
        update(WebhookDelivery)
        .where(WebhookDelivery.id == delivery_id)
        .values(next_attempt_at=now, **_AGAIN)
    )


def replay_all_dead(session: Session, now: datetime, user_id: int | None = None) -> int:
    """Send every dead delivery of an active endpoint again; how many."""
    active = select(WebhookEndpoint.id).where(WebhookEndpoint.active.is_(True))
    if user_id is not None:
        active = active.where(WebhookEndpoint.user_id == user_id)
    result = session.execute(
        update(WebhookDelivery)
        .where(and_(WebhookDelivery.state == "dead", WebhookDelivery.endpoint_id.in_(active)))
        .values(next_attempt_at=now, **_AGAIN)
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def _require_active(session: Session, endpoint_id: int) -> WebhookEndpoint:
    endpoint = get_endpoint(session, endpoint_id)
    if not endpoint.active:
        why = endpoint.disabled_reason or "by hand"
        raise ConfigError(
            f"Webhook endpoint {endpoint_id} is disabled ({why.rstrip('.')}); "
            f"enable it with `mailroom webhooks enable {endpoint_id}` first."
        )
    return endpoint


def make_ping(session: Session, endpoint_id: int, now: datetime) -> int:
    """Add a ``ping`` delivery for the endpoint, due now; its delivery id."""
    _require_active(session, endpoint_id)
    event = Event(f"{PING}-{_random.token_hex(8)}", PING, now, {"endpointId": endpoint_id})
    delivery = WebhookDelivery(
        endpoint_id=endpoint_id,
        event_id=event.id,
        event_type=event.type,
        body=event.body(),
        state="pending",
        attempts=0,
        next_attempt_at=now,
        created_at=now,
    )
    session.add(delivery)
    session.flush()
    return delivery.id
