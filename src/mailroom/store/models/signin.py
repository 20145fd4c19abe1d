"""Who is signed in to the web page, and the failed sign-ins the lock-out counts.

A web session is a random token in an HttpOnly cookie; only its SHA-256 is
stored (like API tokens), so a copy of the database opens no session.
Signing out deletes the row, which ends the session everywhere at once.

A failed sign-in is one row per failure and per key (``name:<SHA-256 of the
user name>`` and ``addr:<client address>``); the limiter in
``mailroom.jmap.auth`` counts the rows of a key inside its window and deletes
rows older than the window. Names are kept only as digests: what people type
into the name field is sometimes their password.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from mailroom.store.models.base import Base, IdType, UtcDateTime, utcnow


class WebSession(Base):
    """A signed-in browser of a user; ``csrf_token`` guards its forms."""

    __tablename__ = "web_sessions"

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    csrf_token: Mapped[str] = mapped_column(String(64))
    user_agent: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    last_seen_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)


class SignInFailure(Base):
    """One failed (or still being checked) sign-in under one limiter key."""

    __tablename__ = "sign_in_failures"
    __table_args__ = (Index("ix_sign_in_failures_key_failed_at", "key", "failed_at"),)

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    key: Mapped[str] = mapped_column(String(80))  # made by mailroom: a digest or an address
    failed_at: Mapped[datetime] = mapped_column(UtcDateTime, index=True)
