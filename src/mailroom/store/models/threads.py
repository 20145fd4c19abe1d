"""Threads (conversations) and the union of their messages' labels.

``message_count``, ``unread_count`` and the ``thread_labels`` rows are kept by
database triggers (see the first migration), so every write path — ORM, raw
SQL, cascading deletes, messages moving between threads — keeps them right.
``in_trash`` ("binned": Trash and no message outside Trash) is kept by
triggers too.
The other columns are derived by ``conversations.refresh`` after a batch.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Index, Integer, String, Text, false, text
from sqlalchemy.orm import Mapped, mapped_column

from mailroom.store.models.base import Base, IdType, UtcDateTime, utcnow


class Thread(Base):
    """A conversation of one user, possibly spanning several accounts."""

    __tablename__ = "threads"
    __table_args__ = (
        Index("ix_threads_user_id_last_message_at", "user_id", "last_message_at"),
        # The unread counts of the sidebar and the tabs bar (migration 0013).
        Index(
            "ix_threads_user_id_unread",
            "user_id",
            postgresql_where=text("unread_count > 0"),
            sqlite_where=text("unread_count > 0"),
        ),
    )

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    subject: Mapped[str] = mapped_column(Text, default="")
    origin: Mapped[str] = mapped_column(String(20), default="new")
    message_count: Mapped[int] = mapped_column(Integer, default=0)
    unread_count: Mapped[int] = mapped_column(Integer, default=0)
    last_message_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    category: Mapped[str | None] = mapped_column(String(20))
    category_pinned: Mapped[bool] = mapped_column(Boolean, default=False)
    snoozed_until: Mapped[datetime | None] = mapped_column(UtcDateTime)
    in_trash: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class ThreadLabel(Base):
    """A label present on at least one message of a thread (kept by triggers)."""

    __tablename__ = "thread_labels"

    thread_id: Mapped[int] = mapped_column(
        ForeignKey("threads.id", ondelete="CASCADE"), primary_key=True
    )
    label_id: Mapped[int] = mapped_column(
        ForeignKey("labels.id", ondelete="CASCADE"), primary_key=True, index=True
    )
    message_count: Mapped[int] = mapped_column(Integer, default=0)
