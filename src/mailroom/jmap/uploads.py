"""Blob uploads (RFC 8620 §6.1): storing a user's bytes, counting uploads, pruning old ones.

Invariants:

* The bytes are content-addressed: one ``blobs`` row per SHA-256, shared with
  the raw messages (``INSERT … ON CONFLICT DO NOTHING``, so concurrent uploads
  of the same bytes both succeed and store them once). A ``jmap_uploads`` row
  makes them one user's upload; only that user sees the blob id
  (``B<sha256>``, ``jmap.blobs``), even when another user uploaded the same
  bytes.
* An upload lives :data:`UPLOAD_LIFETIME` (24 h; RFC 8620 asks for at least
  1 h) after its last upload. :func:`prune_uploads` deletes expired uploads and
  then the blobs that nothing references any more — never bytes a message
  (``messages.raw_sha256``), a live upload, a submission or any other row with
  a foreign key to ``blobs`` still points at (:func:`blob_referrers`).
* At most ``maxConcurrentUpload`` uploads per user are in progress at once
  (:class:`UploadSlots`); the body is read in chunks and refused as soon as it
  grows past ``maxSizeUpload``, so an oversized upload is never held whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, delete, exists, select, update
from sqlalchemy.orm import Session

from mailroom.crypto.mail_writing import seal_blob_data, sealed_blob_key
from mailroom.crypto.sealing import sealing_cipher
from mailroom.jmap.errors import LIMIT, Problem
from mailroom.jmap.request_slots import UserSlots
from mailroom.store.bulk import insert_ignoring_conflicts
from mailroom.store.engine import Store
from mailroom.store.models import Blob, JmapUpload, Message
from mailroom.store.models.base import Base, utcnow

__all__ = [
    "UPLOAD_LIFETIME",
    "StoredUpload",
    "UploadSlots",
    "blob_referrers",
    "own_upload",
    "prune_uploads",
    "read_limited",
    "store_blob",
    "store_upload",
    "upload_media_type",
    "upload_too_large",
]

UPLOAD_LIFETIME = timedelta(hours=24)
DEFAULT_MEDIA_TYPE = "application/octet-stream"
_MAX_MEDIA_TYPE = 255


@dataclass(frozen=True, slots=True)
class StoredUpload:
    """What an upload stored: the digest of its bytes, their size and the media type."""

    sha256: str
    size: int
    media_type: str


def upload_too_large(limit: int) -> Problem:
    """The ``maxSizeUpload`` limit problem (413: the body is too large)."""
    return Problem(
        LIMIT,
        413,
        f"The upload is larger than maxSizeUpload ({limit} octets).",
        limit="maxSizeUpload",
    )


def upload_media_type(header: str | None) -> str:
    """The blob's type: the request's Content-Type as sent, or application/octet-stream."""
    value = (header or "").strip()
    if not value or len(value) > _MAX_MEDIA_TYPE or not value.isprintable():
        return DEFAULT_MEDIA_TYPE
    return value


async def read_limited(
    chunks: AsyncIterator[bytes],
    declared: str | None,
    limit: int,
    too_large: Callable[[int], Problem],
) -> bytes:
    """A request body, refused (``too_large``) before it is read or as soon as it passes ``limit``.

    ``declared`` is the Content-Length header: a body announced as too large
    is refused without reading any of it; otherwise the chunks are counted as
    they arrive.
    """
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        parts.append(chunk)
    return b"".join(parts)


def _too_many_uploads(most: int) -> Problem:
    return Problem(
        LIMIT,
        429,
        f"More than maxConcurrentUpload ({most}) uploads at once.",
        limit="maxConcurrentUpload",
    )


class UploadSlots(UserSlots):
    """Uploads in progress per user, at most ``maxConcurrentUpload`` (429 beyond)."""

    def __init__(self, per_user: int) -> None:
        super().__init__(per_user, _too_many_uploads)


def store_blob(session: Session, data: bytes, owner: int) -> str:
    """Keep ``data`` of ``owner`` in ``blobs`` (once per content); its key.

    The key is the bytes' SHA-256, or while the store seals mail the owner's keyed hash
    of it (``crypto.mail_writing.sealed_blob_key``, also 64 hex digits) with the bytes
    sealed under it, as a sealed message's original: an upload is mail too (the source of
    Email/import, a draft's attachment). The upload's blob id names the key.
    """
    sha256 = hashlib.sha256(data).hexdigest()
    row: dict[str, Any] = {
        "sha256": sha256,
        "size": len(data),
        "data": data,
        "created_at": utcnow(),
    }
    cipher = sealing_cipher(session)
    if cipher is not None:
        sha256 = sealed_blob_key(cipher, owner, sha256)
        row.update(sha256=sha256, data=seal_blob_data(cipher, owner, sha256, data), user_id=owner)
    insert_ignoring_conflicts(session, Blob, [row], conflict=["sha256"])
    return sha256


def own_upload(
    session: Session, user_id: int, sha256: str, size: int, media_type: str, now: datetime
) -> None:
    """Make stored bytes the user's upload until ``now`` + :data:`UPLOAD_LIFETIME`."""
    expires = now + UPLOAD_LIFETIME
    renewed = session.execute(
        update(JmapUpload)
        .where(JmapUpload.user_id == user_id, JmapUpload.sha256 == sha256)
        .values(type=media_type, expires_at=expires)
        .execution_options(synchronize_session=False)
    )
    if not renewed.rowcount:  # type: ignore[attr-defined]
        session.add(
            JmapUpload(
                user_id=user_id,
                sha256=sha256,
                type=media_type,
                size=size,
                created_at=now,
                expires_at=expires,
            )
        )
    session.flush()


def store_upload(store: Store, user_id: int, data: bytes, media_type: str) -> StoredUpload:
    """Store one upload of ``user_id`` (bytes once per content, the upload row per user)."""
    with store.session() as session:
        sha256 = store_blob(session, data, user_id)
        own_upload(session, user_id, sha256, len(data), media_type, utcnow())
    return StoredUpload(sha256, len(data), media_type)


def blob_referrers() -> list[ColumnElement[Any]]:
    """Every column that names bytes in ``blobs``: each foreign key to it, and the messages'."""
    target = Blob.__table__.c.sha256
    columns: list[ColumnElement[Any]] = [Message.__table__.c.raw_sha256]
    for table in Base.metadata.sorted_tables:
        for key in table.foreign_keys:
            if key.column is target and key.parent not in columns:
                columns.append(key.parent)
    return columns


def prune_uploads(store: Store, now: datetime | None = None) -> int:
    """Delete expired uploads and the bytes nothing else uses; the number of uploads deleted."""
    moment = now or utcnow()
    with store.session() as session:
        expired = session.execute(
            select(JmapUpload.id, JmapUpload.sha256).where(JmapUpload.expires_at <= moment)
        ).all()
        if not expired:
            return 0
        session.execute(delete(JmapUpload).where(JmapUpload.id.in_([row.id for row in expired])))
        digests = sorted({row.sha256 for row in expired})
        unused = [~exists().where(column == Blob.sha256) for column in blob_referrers()]
        session.execute(
            delete(Blob)
            .where(Blob.sha256.in_(digests), *unused)
            .execution_options(synchronize_session=False)
        )
    return len(expired)
