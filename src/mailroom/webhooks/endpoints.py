"""Webhook endpoints: added with a fresh secret shown once, listed, enabled again, removed.

The secret (``whsec_`` and 32 random bytes in URL-safe base64) is returned
once, by :func:`add_endpoint`, and stored only sealed with the master key
(:class:`mailroom.secrets.SecretBox`, associated data ``webhook:<id>``): a copy
of the database alone cannot forge signatures. A new endpoint starts reading
every source at its current end, so it receives what happens from now on, not
the history.
"""

from __future__ import annotations

import secrets as _random

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from mailroom.config import Settings
from mailroom.errors import NotFoundError
from mailroom.secrets import SecretBox
from mailroom.store.models import AccountEvent, Change, WebhookCursor, WebhookEndpoint
from mailroom.webhooks.target import check_url

__all__ = [
    "SOURCES",
    "add_endpoint",
    "enable_endpoint",
    "get_endpoint",
    "open_secret",
    "remove_endpoint",
]

# The durable records events come from (mailroom.webhooks.derive).
SOURCES = ("account", "Email", "EmailSubmission")  # in this order within a round


def _context(endpoint_id: int) -> str:
    return f"webhook:{endpoint_id}"


def _source_end(session: Session, user_id: int, source: str) -> int:
    if source == "account":
        query = select(func.max(AccountEvent.id)).where(AccountEvent.user_id == user_id)
    else:
        query = select(func.max(Change.seq)).where(Change.user_id == user_id, Change.type == source)
    return int(session.scalar(query) or 0)


def add_endpoint(
    session: Session, settings: Settings, user_id: int, url: str, events: list[str]
) -> tuple[int, str]:
    """Add an endpoint of ``user_id``; its id and the secret (shown once, stored sealed)."""
    check_url(url, settings.allowed_private_host_list)
    box = SecretBox.from_settings(settings)  # no master key: say so before anything is written
    endpoint = WebhookEndpoint(user_id=user_id, url=url, events=list(events), active=True)
    session.add(endpoint)
    session.flush()
    secret = "whsec_" + _random.token_urlsafe(32)
    endpoint.secret = box.seal(secret.encode(), _context(endpoint.id))
    for source in SOURCES:
        position = _source_end(session, user_id, source)
        session.add(WebhookCursor(endpoint_id=endpoint.id, source=source, position=position))
    session.flush()
    return endpoint.id, secret


def open_secret(box: SecretBox, endpoint_id: int, sealed: bytes | None) -> str:
    """The endpoint's secret in plain text (for signing)."""
    from mailroom.errors import ConfigError

    if not sealed:
        raise ConfigError(f"Webhook endpoint {endpoint_id} has no secret; add it again.")
    return box.open(sealed, _context(endpoint_id)).decode()


def get_endpoint(session: Session, endpoint_id: int) -> WebhookEndpoint:
    """The endpoint or a NotFoundError in one sentence."""
    endpoint = session.get(WebhookEndpoint, endpoint_id)
    if endpoint is None:
        raise NotFoundError(f"There is no webhook endpoint with id {endpoint_id}.")
    return endpoint


def remove_endpoint(session: Session, endpoint_id: int) -> None:
    """Delete an endpoint with its cursors and deliveries."""
    get_endpoint(session, endpoint_id)
    session.execute(delete(WebhookEndpoint).where(WebhookEndpoint.id == endpoint_id))


def enable_endpoint(session: Session, endpoint_id: int) -> None:
    """Make a disabled endpoint (it answered 410 Gone) receive events again."""
    get_endpoint(session, endpoint_id)
    session.execute(
        update(WebhookEndpoint)
        .where(WebhookEndpoint.id == endpoint_id)
        .values(active=True, disabled_reason=None)
    )
