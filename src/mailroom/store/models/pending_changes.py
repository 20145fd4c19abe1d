"""Pending changes: label changes waiting to be carried to the provider.

Written in the same transaction as the operation that caused it. A row is
``pending`` until the provider acknowledged it (``done``) or gave up
(``failed`` after its attempts). While a row for a message is pending, a
sync that reads the older provider state must not revert the local change.
(The word "outbox" is kept for outgoing mail.)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from mailroom.store.models.base import Base, IdType, UtcDateTime, utcnow

PENDING_CHANGE_STATES = ("pending", "done", "failed")


class PendingChange(Base):
    """One change of one message for one account's provider."""

    __tablename__ = "pending_changes"
    __table_args__ = (
        Index("ix_pending_changes_state_next_attempt_at", "state", "next_attempt_at"),
    )

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    # Kept (set to NULL) when the message is deleted forever: the delete itself must propagate.
    message_id: Mapped[int | None] = mapped_column(
        ForeignKey("messages.id", ondelete="SET NULL"), index=True
    )
    provider_id: Mapped[str] = mapped_column(Text)
    operation: Mapped[str] = mapped_column(String(40))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    state: Mapped[str] = mapped_column(String(10), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    next_attempt_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    done_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
