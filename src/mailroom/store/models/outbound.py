"""Outgoing mail: submissions in their lanes, the failed list, the shared pace, replies sent.

``submissions``: one message handed to mailroom for sending (a JMAP
EmailSubmission, a mail from the submission port, ``mailroom send``). The raw
bytes are in ``blobs``; ``(account_id, message_key)`` is unique, so the same
Message-ID queued twice for one account is one submission (the idempotency of
every send path). ``lane`` is fixed when it is queued and decides its pace and
retry rule (SPEC §11). ``state`` moves
``scheduled`` (``send_at`` in the future: the undo window or a later send)
→ ``queued`` → ``sending`` (committed *before* the hand-off) → ``sent``, or to
``failed`` / ``canceled``. A submission found in ``sending`` by a later worker
may have been accepted by the server: it is never handed over again on its own.
A ``sealed`` submission (migration 0025, ``outbound.sealed_queue``) holds its
Message-ID, envelope, delivery status and last error sealed under the owner's
data key and its ``message_key`` as the owner's keyed hash; so are its
``failed_sends.reason`` and ``bounces.recipients``. The ORM opens a sealed row
as it loads and seals a changed column before a flush writes it.

``failed_sends``: submissions that gave up (attempts spent on an unthrottled
lane, 6 hours passed on a throttled one, a permanent refusal, or an unknown
hand-off), for the operator to see, alert on and retry.

``send_rate_buckets``: the token bucket of each lane in the embedded mode,
shared by every worker through the store (Redis holds them at scale).

``vacation_replies``: when the vacation response last answered a sender, so it
answers once per sender per period (RFC 3834 section 2).

``bounces``: a delivery status notification (RFC 3464) that arrived as mail and
reports on a submission; ``recipients`` lists what it said per recipient.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
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
from mailroom.store.models.sealed_rows import open_as_loaded, seal_before_flush

SUBMISSION_STATES = ("scheduled", "queued", "sending", "sent", "failed", "canceled")


class Submission(Base):
    """One outgoing message of one account, from queueing to its last reply."""

    __tablename__ = "submissions"
    __table_args__ = (
        UniqueConstraint("account_id", "message_key"),
        Index("ix_submissions_state_next_attempt_at", "state", "next_attempt_at"),
    )

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    account_id: Mapped[int] = mapped_column(ForeignKey("accounts.id", ondelete="CASCADE"))
    identity_id: Mapped[int | None] = mapped_column(
        ForeignKey("identities.id", ondelete="SET NULL")
    )
    # The stored copy of what is sent (a draft, then the Sent message); null for
    # mail that was never stored (the submission port before it files a copy).
    email_id: Mapped[int | None] = mapped_column(
        ForeignKey("messages.id", ondelete="SET NULL"), index=True
    )
    message_id: Mapped[str] = mapped_column(Text)  # the Message-ID header, without <>
    # store.keys.id_key(message_id); sealed: the owner's keyed hash of it (outbound.sealed_queue).
    message_key: Mapped[str] = mapped_column(Text)
    raw_sha256: Mapped[str] = mapped_column(ForeignKey("blobs.sha256"))
    # RFC 8621 section 7 Envelope: {"mailFrom": {"email", "parameters"}, "rcptTo": [...]}.
    envelope: Mapped[dict[str, Any]] = mapped_column(JSON)
    lane: Mapped[str] = mapped_column(String(10))
    kind: Mapped[str | None] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(10), default="queued")
    queued_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    send_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # counted attempts only
    deferrals: Mapped[int] = mapped_column(Integer, default=0)  # throttled waits, not attempts
    handoff_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    sent_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    last_code: Mapped[int | None] = mapped_column(Integer)
    last_error: Mapped[str | None] = mapped_column(Text)
    # Per recipient: {"smtpReply": "250 2.0.0 Ok", "delivered": "queued", "displayed": "unknown"}.
    delivery_status: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)
    # True: message_id, envelope, delivery_status and last_error are sealed values, and so
    # are this submission's failed_sends.reason and bounces.recipients (migration 0025).
    sealed: Mapped[bool] = mapped_column(Boolean, default=False, server_default=text("false"))


open_as_loaded(Submission, "mailroom.outbound.sealed_queue:open_loaded")
seal_before_flush(Submission, "mailroom.outbound.sealed_queue:seal_changes")


class FailedSend(Base):
    """A submission that gave up, until an operator retries it."""

    __tablename__ = "failed_sends"

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    submission_id: Mapped[int] = mapped_column(
        ForeignKey("submissions.id", ondelete="CASCADE"), unique=True
    )
    lane: Mapped[str] = mapped_column(String(10))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    code: Mapped[int | None] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(Text)
    failed_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, index=True)


class SendRateBucket(Base):
    """The tokens left in one lane's bucket and when they were last refilled."""

    __tablename__ = "send_rate_buckets"

    lane: Mapped[str] = mapped_column(String(10), primary_key=True)
    tokens: Mapped[float] = mapped_column(Float)
    refreshed_at: Mapped[datetime] = mapped_column(UtcDateTime)


class VacationReply(Base):
    """When the vacation response last answered one sender of one user."""

    __tablename__ = "vacation_replies"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    # id_key(lower(address)); sealing: the owner's keyed hash of it (``outbound.vacation``).
    sender_key: Mapped[str] = mapped_column(Text, primary_key=True)
    sent_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class Bounce(Base):
    """A delivery status notification that reports on one submission."""

    __tablename__ = "bounces"
    __table_args__ = (UniqueConstraint("submission_id", "message_id"),)

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    submission_id: Mapped[int] = mapped_column(ForeignKey("submissions.id", ondelete="CASCADE"))
    message_id: Mapped[int] = mapped_column(
        ForeignKey("messages.id", ondelete="CASCADE"), index=True
    )
    # [{"recipient", "action", "status", "diagnostic"}] from the report's per-recipient fields.
    recipients: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    received_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


__all__ = [
    "SUBMISSION_STATES",
    "Bounce",
    "FailedSend",
    "SendRateBucket",
    "Submission",
    "VacationReply",
]
