"""Webhooks: endpoints of outside systems, how far each has read, account events, deliveries.

``webhook_endpoints``: a URL of one user's outside system, its signing secret
(sealed with the master key, associated data ``webhook:<id>``), the event
types it wants and whether it is active (a ``410 Gone`` answer disables it).

``webhook_cursors``: per endpoint and source (the ``Email`` and
``EmailSubmission`` change log, the ``account`` events) the last position
already turned into deliveries.

``account_events``: what happened to an account that no other table keeps as
a history — its status changed, it ran into refused credentials, its import
finished. Database triggers on ``accounts`` write them (migration 0015), so
every code path that changes an account records its event in the same
transaction.

``webhook_deliveries``: one event for one endpoint, at most once per
``(endpoint_id, event_id)``; its body is fixed when it is made, so every
attempt and every replay signs the same bytes.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from mailroom.store.models.base import Base, IdType, UtcDateTime, utcnow

DELIVERY_STATES = ("pending", "delivered", "dead")


class WebhookEndpoint(Base):
    """Where one user's outside system wants its events, signed with its secret."""

    __tablename__ = "webhook_endpoints"

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    url: Mapped[str] = mapped_column(Text)
    secret: Mapped[bytes | None] = mapped_column(LargeBinary)  # sealed, see the module
    events: Mapped[list[str]] = mapped_column(JSON, default=list)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    disabled_reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class WebhookCursor(Base):
    """How far one endpoint has turned one source into deliveries."""

    __tablename__ = "webhook_cursors"

    endpoint_id: Mapped[int] = mapped_column(
        ForeignKey("webhook_endpoints.id", ondelete="CASCADE"), primary_key=True
    )
    source: Mapped[str] = mapped_column(String(20), primary_key=True)
    position: Mapped[int] = mapped_column(BigInteger, default=0)


class AccountEvent(Base):
    """One thing that happened to an account (written by triggers on ``accounts``)."""

    __tablename__ = "account_events"
    __table_args__ = (Index("ix_account_events_user_id_id", "user_id", "id"),)

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    type: Mapped[str] = mapped_column(String(30))
    status: Mapped[str | None] = mapped_column(String(20))
    previous_status: Mapped[str | None] = mapped_column(String(20))
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class WebhookDelivery(Base):
    """One event on its way to one endpoint: attempts, the lease of the worker, the outcome."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        UniqueConstraint("endpoint_id", "event_id"),
        Index("ix_webhook_deliveries_state_next_attempt_at", "state", "next_attempt_at"),
    )

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    endpoint_id: Mapped[int] = mapped_column(ForeignKey("webhook_endpoints.id", ondelete="CASCADE"))
    event_id: Mapped[str] = mapped_column(String(100))
    event_type: Mapped[str] = mapped_column(String(30))
    body: Mapped[str] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(10), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    lease_token: Mapped[str | None] = mapped_column(String(32))
    leased_until: Mapped[datetime | None] = mapped_column(UtcDateTime)
    last_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    delivered_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


__all__ = [
    "DELIVERY_STATES",
    "AccountEvent",
    "WebhookCursor",
    "WebhookDelivery",
    "WebhookEndpoint",
]
