"""Events found in mail, and the secret address of each user's calendar feed.

``message_events``: one schema.org item (Event, FlightReservation,
LodgingReservation, EventReservation, ParcelDelivery) that the events step
(:mod:`mailroom.events`) found in a message's raw HTML. Unique per
``(message_id, position)``: extracting a message again inserts nothing new.
Times are UTC; ``tzid`` is the IANA zone the mail gave (the feed writes local
times in it), ``all_day`` a date without a time. ``source`` is the item as
the mail had it, for JMAP clients that want more than the summary.

``calendar_feeds``: the SHA-256 of the token in a user's feed address; a new
token replaces the old one, which then stops working.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from mailroom.store.models.base import Base, IdType, UtcDateTime, utcnow
from mailroom.store.models.sealed_rows import open_as_loaded


class MessageEvent(Base):
    """One event-like schema.org item a message carries (module docstring)."""

    __tablename__ = "message_events"
    __table_args__ = (
        UniqueConstraint("message_id", "position"),
        Index("ix_message_events_user_id_starts_at", "user_id", "starts_at"),
    )

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    message_id: Mapped[int] = mapped_column(ForeignKey("messages.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(30))
    summary: Mapped[str] = mapped_column(Text)
    location: Mapped[str | None] = mapped_column(Text)
    starts_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    ends_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    all_day: Mapped[bool] = mapped_column(Boolean, default=False)
    tzid: Mapped[str | None] = mapped_column(Text)
    source: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    # True: summary, location and source are values sealed under the owner's data key
    # (``events.sealed_events``, migration 0024), opened as the row loads.
    sealed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))


open_as_loaded(MessageEvent, "mailroom.events.sealed_events:open_loaded")


class CalendarFeed(Base):
    """The token of one user's calendar feed address; only its SHA-256 is kept."""

    __tablename__ = "calendar_feeds"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
