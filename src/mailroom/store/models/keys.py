"""Owner data keys, owner key rotations (migration 0019) and sealed word lists (0026).

A data key is never stored in the clear: ``wrapped`` is the key sealed by the
installation's key wrapper (``mailroom.crypto.wrapping``), bound to the owner
and the version. ``wrapped_by`` names the wrapping key by a short id.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from mailroom.store.models.base import Base, IdType, UtcDateTime, utcnow


class OwnerKey(Base):
    """One version of one owner's data key, wrapped."""

    __tablename__ = "owner_keys"
    __table_args__ = (UniqueConstraint("user_id", "version"),)

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    version: Mapped[int] = mapped_column(Integer)
    wrapped: Mapped[bytes] = mapped_column(LargeBinary)
    wrapped_by: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)


class KeyRotation(Base):
    """An owner key rotation: re-encrypting values from one version to the next.

    ``progress`` maps ``"table.column"`` to the last row id already done;
    ``state`` is ``running`` or ``done``.
    """

    __tablename__ = "key_rotations"

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    from_version: Mapped[int] = mapped_column(Integer)
    to_version: Mapped[int] = mapped_column(Integer)
    progress: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    state: Mapped[str] = mapped_column(String(10), default="running")
    started_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class BlindVocabulary(Base):
    """Part of a sealing owner's word list, sealed (migration 0026, ``crypto.blind_vocabulary``).

    ``words``: the sorted words, newline-separated, sealed under the owner's data key and
    bound to this row; ``word_count``: how many.
    """

    __tablename__ = "blind_vocabulary"

    id: Mapped[int] = mapped_column(IdType, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    words: Mapped[bytes] = mapped_column(LargeBinary)
    word_count: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utcnow)
