"""The change log that JMAP reads.

Every mail change writes a row here in the same transaction as the change.
The autoincrement ``seq`` is the state token: the state of (user, type) is
the highest ``seq`` of that pair, and ``Foo/changes`` returns rows after it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, String
from sqlalchemy.orm import Mapped, mapped_column

from mailroom.store.models.base import Base, IdType, UtcDateTime, utcnow

CHANGE_KINDS = ("created", "updated", "destroyed")


class Change(Base):
    """One change of one object (Email, Thread, Mailbox) of one user."""

    __tablename__ = "changes"
    __table_args__ = (Index("ix_changes_user_id_type_seq", "user_id", "type", "seq"),)

    seq: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    type: Mapped[str] = mapped_column(String(20))
    object_id: Mapped[int] = mapped_column(IdType)
    kind: Mapped[str] = mapped_column(String(10))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
