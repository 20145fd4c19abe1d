"""The audit log: one row per security-relevant action, never updated (migration 0018).

``user_id`` has no foreign key on purpose: the record of what a user did must
outlive the user. ``via`` says how the action came (``web``, ``jmap``,
``smtp``, ``cli``) and ``origin`` from where: the client address for the
network, ``<OS user>@<host>`` for a command.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from mailroom.store.models.base import Base, IdType, UtcDateTime, utcnow


class AuditEntry(Base):
    """What happened, to whom, when, how and from where."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_user_name_at", "user_name", "at"),)

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow, index=True)
    action: Mapped[str] = mapped_column(String(40))  # a name of mailroom.audit.ACTIONS
    user_id: Mapped[int | None] = mapped_column(IdType)
    user_name: Mapped[str | None] = mapped_column(Text)
    via: Mapped[str] = mapped_column(String(10))
    origin: Mapped[str | None] = mapped_column(Text)
    detail: Mapped[str] = mapped_column(Text, default="", server_default="")
