"""Gmail's own state: the backfill of each account and its share of the quota.

``gmail_backfills``: one row per Gmail account, the resumable backfill
(``providers.gmail.backfill`` holds its state machine): the phase (``inbox``,
then ``mailbox``, then ``finished`` or ``abandoned``), the page token of the
listing to continue from, the failed attempts so far and when the next one
may run. Queried for the accounts whose backfill is due, hence a table and
not a key of ``accounts.settings``.

``gmail_quota_limits``: what the quota pacer has learned about one account
(``providers.gmail.quota``): the limit Google enforced, when it was learned,
the slow-downs since and until when the account must wait. The row is also
the lock that makes one account's reservations one at a time.

``gmail_quota_usage``: the units each account spent in each second of the
last minute, summed for the sliding one-minute window (the embedded mode;
Redis holds the same at scale).

The messages Gmail could not give are in the provider-neutral
``skipped_messages`` ledger (``models.sync``).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from mailroom.store.models.base import Base, UtcDateTime, utcnow

BACKFILL_PHASES = ("inbox", "mailbox", "finished", "abandoned")


class GmailBackfill(Base):
    """The resumable backfill of one Gmail account: where it is and when it may go on."""

    __tablename__ = "gmail_backfills"
    __table_args__ = (Index("ix_gmail_backfills_phase_not_before", "phase", "not_before"),)

    account_id: Mapped[int] = mapped_column(
        ForeignKey("accounts.id", ondelete="CASCADE"), primary_key=True
    )
    phase: Mapped[str] = mapped_column(String(10), default="inbox")
    page_token: Mapped[str | None] = mapped_column(Text)  # Google's, opaque and unbounded
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    not_before: Mapped[datetime | None] = mapped_column(UtcDateTime)
    last_error: Mapped[str | None] = mapped_column(Text)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, onupdate=utcnow)


class GmailQuotaLimit(Base):
    """What the quota pacer learned about one account, shared by every worker."""

    __tablename__ = "gmail_quota_limits"

    account_id: Mapped[int] = mapped_column(
        ForeignKey("accounts.id", ondelete="CASCADE"), primary_key=True
    )
    learned_limit: Mapped[int | None] = mapped_column(Integer)  # units per minute
    learned_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    slowdowns: Mapped[int] = mapped_column(Integer, default=0)
    last_rejected_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    blocked_until: Mapped[datetime | None] = mapped_column(UtcDateTime)


class GmailQuotaUsage(Base):
    """The quota units one account spent in one second (epoch seconds)."""

    __tablename__ = "gmail_quota_usage"

    account_id: Mapped[int] = mapped_column(
        ForeignKey("accounts.id", ondelete="CASCADE"), primary_key=True
    )
    second: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    units: Mapped[int] = mapped_column(Integer)


__all__ = ["BACKFILL_PHASES", "GmailBackfill", "GmailQuotaLimit", "GmailQuotaUsage"]
