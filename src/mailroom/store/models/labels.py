"""Labels are the one mechanism for folders, tabs of state and user tags.

A label belongs to the user; a binding per (label, account) carries the
provider's own id for it. Nested names become parent chains: the label with
path ``Work/Invoices`` has the label ``Work`` as parent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    true,
)
from sqlalchemy.orm import Mapped, mapped_column

from mailroom.store.models.base import Base, IdType, UtcDateTime, utcnow

SYSTEM_ROLES = ("inbox", "sent", "drafts", "archive", "spam", "trash", "snoozed", "starred")


class Label(Base):
    """A user's label; ``role`` marks the system labels (inbox, trash, ...)."""

    __tablename__ = "labels"
    __table_args__ = (UniqueConstraint("user_id", "path"),)

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(Text)
    path: Mapped[str] = mapped_column(Text)
    parent_id: Mapped[int | None] = mapped_column(ForeignKey("labels.id", ondelete="CASCADE"))
    role: Mapped[str | None] = mapped_column(String(20))
    # JMAP Mailbox sortOrder and isSubscribed (RFC 8621 section 2).
    sort_order: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    is_subscribed: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class LabelBinding(Base):
    """The provider's id of a label in one account (Gmail label id, folder id, mailbox)."""

    __tablename__ = "label_bindings"
    __table_args__ = (
        UniqueConstraint("account_id", "provider_ref"),
        UniqueConstraint("label_id", "account_id"),
    )

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    label_id: Mapped[int] = mapped_column(ForeignKey("labels.id", ondelete="CASCADE"))
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    provider_ref: Mapped[str] = mapped_column(Text)


class Folder(Base):
    """A provider folder (IMAP mailbox, Graph folder, Maildir folder) and its sync marks."""

    __tablename__ = "folders"
    __table_args__ = (UniqueConstraint("account_id", "path"),)

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    path: Mapped[str] = mapped_column(Text)
    delimiter: Mapped[str | None] = mapped_column(Text)
    special_use: Mapped[str | None] = mapped_column(String(40))
    label_id: Mapped[int | None] = mapped_column(ForeignKey("labels.id", ondelete="SET NULL"))
    uidvalidity: Mapped[int | None] = mapped_column(BigInteger)
    state: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
