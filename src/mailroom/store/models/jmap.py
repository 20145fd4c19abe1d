"""What the JMAP server keeps beside the change log: the retention floor.

``prune_changes`` (``mailroom.jmap.changes``) deletes old change-log rows and
raises the floor of each (user, type) to the highest sequence it deleted. A
client whose state is below the floor gets ``cannotCalculateChanges`` and
must resync; a state is never reported lower than the floor, so pruning
every row of a type never makes its state go backwards.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, String
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
