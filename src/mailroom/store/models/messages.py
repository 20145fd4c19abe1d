"""Messages, their bodies, raw bytes, labels, references and locations.

Identity: a message is (account, provider message id), enforced by a unique
constraint so overlapping batches and retries never insert it twice. Where a
message lives at the provider (folder, UIDVALIDITY, UID) is a separate
mapping, so a move or a UIDVALIDITY change re-locates a message instead of
creating a second one.
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
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from mailroom.store.models.base import Base, IdType, UtcDateTime, utcnow
from mailroom.store.models.sealed_rows import open_as_loaded, seal_before_flush

_HELD = "category_held_at IS NOT NULL AND category_released_at IS NULL"


class Message(Base):
    """One stored message: the searchable, listable facts of it."""

    __tablename__ = "messages"
    __table_args__ = (
        UniqueConstraint("provider_id", "account_id"),
        Index("ix_messages_user_id_received_at", "user_id", "received_at"),
        Index("ix_messages_subject_key_received_at", "subject_key", "received_at"),
        # The held-mail sweep (migration 0017): only mail still held for the assistant.
        Index(
            "ix_messages_held",
            "category_held_at",
            postgresql_where=text(_HELD),
            sqlite_where=text(_HELD),
        ),
    )

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    account_id: Mapped[int] = mapped_column(
        ForeignKey("accounts.id", ondelete="CASCADE"), index=True
    )
    provider_id: Mapped[str] = mapped_column(Text)
    provider_thread_id: Mapped[str | None] = mapped_column(Text)
    thread_id: Mapped[int | None] = mapped_column(
        ForeignKey("threads.id", ondelete="SET NULL"), index=True
    )
    message_id_header: Mapped[str | None] = mapped_column(Text, index=True)
    subject: Mapped[str] = mapped_column(Text, default="")
    subject_key: Mapped[str | None] = mapped_column(String(40))  # conversations.subject
    from_name: Mapped[str] = mapped_column(Text, default="")
    from_email: Mapped[str] = mapped_column(Text, default="")
    recipients: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    sent_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    received_at: Mapped[datetime] = mapped_column(UtcDateTime)
    size: Mapped[int] = mapped_column(Integer, default=0)
    preview: Mapped[str] = mapped_column(Text, default="")
    has_attachment: Mapped[bool] = mapped_column(Boolean, default=False)
    list_id: Mapped[str | None] = mapped_column(Text)
    category: Mapped[str | None] = mapped_column(String(20))
    category_stage: Mapped[str | None] = mapped_column(String(40))
    category_signal: Mapped[str | None] = mapped_column(Text)
    rule_category: Mapped[str | None] = mapped_column(String(20))
    # The assistant (mailroom.assistant): held until its verdict, released by
    # the first of three releasers; the verdict; when it was asked (once).
    category_held_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    category_released_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    assistant_category: Mapped[str | None] = mapped_column(String(20))
    assistant_reason: Mapped[str | None] = mapped_column(Text)
    assistant_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    seen_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    raw_sha256: Mapped[str | None] = mapped_column(String(64))
    parse_notes: Mapped[list[str]] = mapped_column(JSON, default=list)
    thread_note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    # The mail columns above are sealed values and the lookup columns keyed hashes
    # (crypto.message_fields); a clear row from before stays as it was.
    sealed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))


class MessageBody(Base):
    """The bodies and headers of a message, kept apart so list queries stay narrow.

    ``html_body`` is the raw HTML (structured data lives only there) and is
    never rendered; pages render ``sanitized_html`` only.
    """

    __tablename__ = "message_bodies"

    message_id: Mapped[int] = mapped_column(
        ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True
    )
    text_body: Mapped[str] = mapped_column(Text, default="")
    html_body: Mapped[str | None] = mapped_column(Text)
    sanitized_html: Mapped[str | None] = mapped_column(Text)
    headers: Mapped[list[list[str]]] = mapped_column(JSON, default=list)
    attachments: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    # True: the bodies, headers and attachment list are values sealed under the owner's data key
    sealed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))


class Blob(Base):
    """Raw RFC 5322 bytes, content-addressed by SHA-256, in the same transaction as the message.

    A sealed blob has an owner (``user_id``): its data is sealed under that owner's data key
    and its key is a keyed hash of the bytes under that key, so it is never shared.
    """

    __tablename__ = "blobs"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(Integer)
    data: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    user_id: Mapped[int | None] = mapped_column(IdType, index=True)


class MessageLabel(Base):
    """A label on a message; thread label union and counters follow by trigger."""

    __tablename__ = "message_labels"

    message_id: Mapped[int] = mapped_column(
        ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True
    )
    label_id: Mapped[int] = mapped_column(
        ForeignKey("labels.id", ondelete="CASCADE"), primary_key=True, index=True
    )


class MessageKeyword(Base):
    """A keyword (RFC 8621 section 4.1.1, IMAP flag) of a message, lower-cased.

    ``$seen`` lives in ``messages.seen_at`` and ``$flagged`` in the Starred
    label; every other keyword (``$answered``, ``$forwarded``, ``$junk``,
    custom ones) is a row here.
    """

    __tablename__ = "message_keywords"

    message_id: Mapped[int] = mapped_column(
        ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True
    )
    keyword: Mapped[str] = mapped_column(Text, primary_key=True, index=True)


class MessageRef(Base):
    """A Message-ID this message names in In-Reply-To or References (for threading)."""

    __tablename__ = "message_refs"

    message_id: Mapped[int] = mapped_column(
        ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True
    )
    ref: Mapped[str] = mapped_column(Text, primary_key=True, index=True)
    position: Mapped[int] = mapped_column(Integer, default=0)


class MessageLocation(Base):
    """Where a message lives at the provider: folder, UIDVALIDITY and UID (or a file key)."""

    __tablename__ = "message_locations"
    __table_args__ = (
        UniqueConstraint("folder_id", "uidvalidity", "uid"),
        UniqueConstraint("folder_id", "provider_ref"),
    )

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    message_id: Mapped[int] = mapped_column(
        ForeignKey("messages.id", ondelete="CASCADE"), index=True
    )
    folder_id: Mapped[int] = mapped_column(ForeignKey("folders.id", ondelete="CASCADE"))
    uidvalidity: Mapped[int | None] = mapped_column(BigInteger)
    uid: Mapped[int | None] = mapped_column(BigInteger)
    provider_ref: Mapped[str | None] = mapped_column(Text)


# Sealed rows (crypto.message_fields) are opened as the ORM loads them and their changed
# mail columns sealed again before a flush writes them: ORM readers never see ciphertext.
open_as_loaded(Message, "mailroom.crypto.message_fields:open_loaded")
seal_before_flush(Message, "mailroom.crypto.message_fields:seal_changes")
