"""The webhook worker: one round derives new deliveries, claims the due ones and POSTs them.

Each POST goes through the SSRF guard (:mod:`mailroom.providers.guarded_http`,
the transport every outbound HTTP request uses), follows no redirect, waits at most :data:`TIMEOUT`
seconds and never reads the answer's body (only its status counts).
The body is the delivery's stored JSON; the headers carry the event id, this
attempt's timestamp and the signature (:mod:`mailroom.webhooks.signing`).
What came of it is settled by :func:`mailroom.webhooks.deliveries.settle`.

The clock and the jitter's random source are injected, so tests drive
retries through hours of backoff without sleeping.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import httpx
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.errors import ConfigError, ProviderError
from mailroom.providers.guarded_http import guarded_client
from mailroom.secrets import SecretBox
from mailroom.store.engine import Store
from mailroom.store.models import WebhookEndpoint, utcnow
from mailroom.webhooks import signing
from mailroom.webhooks.deliveries import Claim, claim_due, settle
from mailroom.webhooks.derive import derive_all
from mailroom.webhooks.endpoints import open_secret
from mailroom.webhooks.target import check_url

__all__ = ["BATCH", "TIMEOUT", "Attempt", "Round", "WebhookWorker"]

log = logging.getLogger(__name__)

TIMEOUT = 10.0  # seconds per POST, far below the lease
BATCH = 50  # deliveries claimed per round


@dataclass(frozen=True)
class Attempt:
    """What one POST came to."""

    state: str  # delivered, pending (retried later), dead, lost (another worker has it)
    code: int | None
    error: str | None


@dataclass(frozen=True)
class Round:
    """What one round did, and whether work is left for another at once."""

    made: int
    attempts: int
    delivered: int
    more: bool


class WebhookWorker:
    """Derives and delivers webhooks of one store (many may run at once, see deliveries)."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        clock: Callable[[], datetime] = utcnow,
        rng: random.Random | None = None,
        timeout: float = TIMEOUT,
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.rng = rng or random.Random()
        self._allowed = tuple(settings.allowed_private_host_list)
        self._client = guarded_client(self._allowed, timeout=timeout)
        self._box: SecretBox | None = None

    def close(self) -> None:
        """Close the HTTP connections."""
        self._client.close()

    def run_once(self) -> Round:
        """Derive new deliveries, then deliver up to :data:`BATCH` due ones."""
        made, more = derive_all(self.store, self.clock())
        claims = claim_due(self.store, self.clock(), BATCH)
        delivered = sum(self.deliver(claim).state == "delivered" for claim in claims)
        return Round(made, len(claims), delivered, more or len(claims) == BATCH)

    def send_now(self, delivery_id: int) -> Attempt | None:
        """Deliver one due delivery at once (``mailroom webhooks test``); None if not due."""
        claims = claim_due(self.store, self.clock(), 1, only=delivery_id)
        return self.deliver(claims[0]) if claims else None

    def deliver(self, claim: Claim) -> Attempt:
        """POST one claimed delivery and settle the outcome."""
        code: int | None = None
        error: str | None = None
        try:
            url, secret = self._endpoint(claim.endpoint_id)
            check_url(url, self._allowed)  # http stays for allow-listed private hosts only
            body = claim.body.encode()
            stamp = int(self.clock().timestamp())
            signed = signing.headers(secret, claim.event_id, stamp, body)
            # Streamed and closed unread: only the status counts, whatever the body's size.
            with self._client.stream("POST", url, content=body, headers=signed) as response:
                code = response.status_code
        except (ConfigError, ProviderError) as exc:
            error = str(exc)
        except httpx.HTTPError as exc:
            error = f"The endpoint could not be reached ({type(exc).__name__})."
        state = settle(self.store, claim, code, error, self.clock(), self.rng)
        if state == "dead":
            log.warning(
                "Webhook delivery %s (event %s) is dead: %s",
                claim.id,
                claim.event_id,
                error or f"HTTP {code}",
            )
        return Attempt(state, code, error)

    def _endpoint(self, endpoint_id: int) -> tuple[str, str]:
        with self.store.session() as session:
            row = session.execute(
                select(WebhookEndpoint.url, WebhookEndpoint.secret).where(
                    WebhookEndpoint.id == endpoint_id
                )
            ).one()
        if self._box is None:
            self._box = SecretBox.from_settings(self.settings)
        return row.url, open_secret(self._box, endpoint_id, row.secret)
