"""What the JMAP server keeps beside the change log and the mail itself.

``change_floors``: ``prune_changes`` (``mailroom.jmap.changes``) deletes old
change-log rows and raises the floor of each (user, type) to the highest
sequence it deleted. A client whose state is below the floor gets
``cannotCalculateChanges`` and must resync; a state is never reported lower
than the floor, so pruning every row of a type never makes its state go
backwards.

``jmap_uploads``: a blob a client uploaded (RFC 8620 section 6.1); the bytes
are in ``blobs`` (content-addressed), this row makes them the user's.
``push_subscriptions`` (RFC 8620 section 7.2), ``vacation_responses`` (RFC
8621 section 8, one per user) and ``identities`` (RFC 8621 section 6: the
name, reply-to, bcc and signatures a user set for an address of an account).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    String,
    Text,
    false,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from mailroom.store.models.base import Base, IdType, UtcDateTime, utcnow


class ChangeFloor(Base):
    """The highest pruned change-log sequence of one (user, type)."""

    __tablename__ = "change_floors"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    type: Mapped[str] = mapped_column(String(20), primary_key=True)
    seq: Mapped[int] = mapped_column(IdType)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class JmapUpload(Base):
    """One upload of a user: its bytes (``blobs.sha256``), media type and size."""

    __tablename__ = "jmap_uploads"
    __table_args__ = (Index("ix_jmap_uploads_user_id_sha256", "user_id", "sha256"),)

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    sha256: Mapped[str] = mapped_column(ForeignKey("blobs.sha256"))
    type: Mapped[str] = mapped_column(Text, default="application/octet-stream")
    size: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime, index=True)


class PushSubscription(Base):
    """A client's push endpoint (RFC 8620 section 7.2), verified before it gets changes."""

    __tablename__ = "push_subscriptions"

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    device_client_id: Mapped[str] = mapped_column(Text)
    url: Mapped[str] = mapped_column(Text)
    keys: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    verification_code: Mapped[str] = mapped_column(String(64))
    verified: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    types: Mapped[list[str] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class VacationResponse(Base):
    """The user's automatic reply (RFC 8621 section 8); sending it is outbound's work."""

    __tablename__ = "vacation_responses"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    is_enabled: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    from_date: Mapped[datetime | None] = mapped_column(UtcDateTime)
    to_date: Mapped[datetime | None] = mapped_column(UtcDateTime)
    subject: Mapped[str | None] = mapped_column(Text)
    text_body: Mapped[str | None] = mapped_column(Text)
    html_body: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class Identity(Base):
    """An address a user sends as, of one account, with the name and signatures they chose.

    An address may have several identities (other names or signatures). One
    identity per account is its default (``is_default``: the account's own
    address, which cannot be deleted); the partial unique index keeps it one
    even when two requests create it at the same moment.
    """

    __tablename__ = "identities"
    __table_args__ = (
        Index("ix_identities_account_id_email", "account_id", "email"),
        Index(
            "uq_identities_default_account_id",
            "account_id",
            unique=True,
            postgresql_where=text("is_default"),
            sqlite_where=text("is_default"),
        ),
    )

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    email: Mapped[str] = mapped_column(Text)
    is_default: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    name: Mapped[str] = mapped_column(Text, default="")
    reply_to: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    bcc: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    text_signature: Mapped[str] = mapped_column(Text, default="")
    html_signature: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
