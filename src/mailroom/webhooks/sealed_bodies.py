"""Delivery bodies of owners whose mail is sealed: sealed as well.

A ``messageNew`` body quotes its message (subject, sender), so while a store
seals new mail (``crypto.sealing.seals_new_mail``) a delivery's body is
stored as an ``mrf1.`` value under the owner's data key, bound to
``webhook_deliveries.body`` of the delivery's id. The id comes from the
insert: the rows are inserted with an empty body and the sealed bodies
written by id in the same transaction (as ``crypto.message_fields`` does for
messages), so the clear body reaches neither the table nor the write-ahead
log. The worker opens a body when it claims the delivery, and signs and
sends the clear JSON as before; deleting the owner (its key first) leaves
their undelivered bodies unreadable. ``crypto.columns`` registers the column
for owner key rotations.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.crypto.fields import TEXT_PREFIX, from_text
from mailroom.crypto.sealed_rows import write_sealed_rows
from mailroom.crypto.sealing import require_cipher
from mailroom.store.chunks import in_chunks
from mailroom.store.models import WebhookDelivery, WebhookEndpoint

TABLE = "webhook_deliveries"
COLUMN = "body"
OWNER_WHERE = "endpoint_id IN (SELECT id FROM webhook_endpoints WHERE user_id = :owner)"
SEALED_WHERE = "body LIKE 'mrf1.%'"


def write_sealed(session: Session, owner: int, bodies: Mapping[int, str]) -> None:
    """Seal the clear ``bodies`` (delivery id → body) of rows just inserted with an empty body."""
    rows = {delivery_id: {COLUMN: body} for delivery_id, body in bodies.items()}
    write_sealed_rows(session, WebhookDelivery, owner, rows)


def opened_bodies(session: Session, rows: Mapping[int, tuple[int, str]]) -> dict[int, str]:
    """Delivery id → clear body, for rows given as delivery id → (endpoint id, stored body)."""
    sealed = {d: row for d, row in rows.items() if row[1].startswith(TEXT_PREFIX)}
    opened = {d: body for d, (_endpoint, body) in rows.items() if d not in sealed}
    if not sealed:
        return opened
    owners: dict[int, int] = {}
    for chunk in in_chunks(sorted({endpoint for endpoint, _body in sealed.values()})):
        found = session.execute(
            select(WebhookEndpoint.id, WebhookEndpoint.user_id).where(WebhookEndpoint.id.in_(chunk))
        )
        owners.update((int(endpoint), int(owner)) for endpoint, owner in found)
    cipher = require_cipher(session, "A webhook delivery's body")
    for delivery_id, (endpoint_id, body) in sealed.items():
        owner = owners[endpoint_id]
        opened[delivery_id] = cipher.decrypt_text(
            owner, TABLE, COLUMN, delivery_id, from_text(body)
        )
    return opened
