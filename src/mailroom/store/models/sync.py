"""Per-account sync state and the ledger of messages that could not be stored."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from mailroom.store.models.base import Base, IdType, UtcDateTime, utcnow


class SyncState(Base):
    """A named cursor or mark of one account (history id, delta links, import marks)."""

    __tablename__ = "sync_state"

    account_id: Mapped[int] = mapped_column(
        ForeignKey("accounts.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)


class SkippedMessage(Base):
    """A message the engine saw but could not or would not store, and why."""

    __tablename__ = "skipped_messages"
    __table_args__ = (UniqueConstraint("account_id", "provider_id"),)

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    provider_id: Mapped[str] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(40))
    reason: Mapped[str] = mapped_column(Text)
    labels: Mapped[list[str]] = mapped_column(JSON, default=list)
    headers: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)  # first seen
    last_seen_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
