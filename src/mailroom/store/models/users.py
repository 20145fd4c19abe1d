"""Users own accounts; accounts are the connections to mail providers."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, LargeBinary, String, Text, UniqueConstraint, text
from sqlalchemy.orm import Mapped, mapped_column

from mailroom.store.models.base import Base, IdType, UtcDateTime, utcnow


class User(Base):
    """A person (or team login) that owns accounts, labels and threads."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    name: Mapped[str] = mapped_column(Text, unique=True)
    password_hash: Mapped[str | None] = mapped_column(Text)
    settings: Mapped[dict[str, Any]] = mapped_column(
        JSON, default=dict, server_default=text("'{}'")
    )
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class Account(Base):
    """One connection to a mail provider (IMAP, Gmail, Graph, or local files).

    Status is ``active``, ``auth_error`` or ``disconnected``; watch state is
    ``idle``, ``watching`` or ``backoff:<ms>``.
    """

    __tablename__ = "accounts"
    __table_args__ = (UniqueConstraint("user_id", "name"),)

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(Text)
    provider: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(20), default="active")
    status_reason: Mapped[str | None] = mapped_column(Text)
    watch_state: Mapped[str] = mapped_column(String(40), default="idle")
    settings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    secret: Mapped[bytes | None] = mapped_column(LargeBinary)
    # The outgoing server's password, sealed like ``secret`` (associated data
    # ``account:<id>:smtp``); null when it is the same as the incoming one.
    smtp_secret: Mapped[bytes | None] = mapped_column(LargeBinary)
    import_total: Mapped[int] = mapped_column(Integer, default=0)
    import_done: Mapped[int] = mapped_column(Integer, default=0)
    import_finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class ApiToken(Base):
    """A bearer token of a user for JMAP; only its SHA-256 is stored.

    ``expires_at`` (None: never) is when the token stops working; an expired
    token is refused like an unknown one. ``last_used_at`` is written at most
    every few minutes, so it is a little behind.
    """

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    token_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
