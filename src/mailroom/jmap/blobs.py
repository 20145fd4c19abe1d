"""Blob lookup: what a JMAP blob id names for one user, in one place.

Three kinds of blob id (``jmap.ids``) name bytes a user may read:

* ``B<sha256>`` — an upload (RFC 8620 §6.1): bytes in ``blobs`` that this
  user uploaded (a ``jmap_uploads`` row of theirs, not expired). Another
  user's upload of the same bytes does not make them visible to this user.
* ``R<id>`` — the raw RFC 5322 bytes of one of the user's messages.
* ``A<id>-<part>`` — one MIME part of one of the user's messages, decoded.

Sealed raw bytes (``crypto.mail_reading``) are opened here; a sealed
message's ``R<id>`` comes back as opened ``content``, so a download never
streams sealed bytes out of ``blobs``.
* ``B<sha256>-<part>`` — one MIME part of an upload of the user, decoded
  (the part blob ids ``Email/parse`` reports for an uploaded message).

Whatever the reason a blob is not there (malformed id, another user's,
expired, deleted) the answer is the same ``None``, which callers report as
``notFound`` / 404. Download, Blob/copy, Email/import and Email/set (drafts
with attachments) all call :func:`find_blob` or :func:`read_blob`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from mailroom.crypto.mail_reading import blob_bytes
from mailroom.jmap import ids
from mailroom.jmap.bodies import find_part, heavy_work, parse_structure, part_content
from mailroom.store.models import Blob, JmapUpload, Message
from mailroom.store.models.base import utcnow

__all__ = ["FoundBlob", "blob_data", "find_blob", "read_blob"]


@dataclass(frozen=True, slots=True)
class FoundBlob:
    """A blob a user may read: stored bytes (``sha256``) or a part's decoded ``content``."""

    sha256: str | None
    size: int
    content: bytes | None
    media_type: str
    filename: str | None = None


def _upload(session: Session, user_id: int, sha256: str, now: datetime) -> FoundBlob | None:
    """The user's newest live upload of these bytes (a sealed one opened whole)."""
    row = session.execute(
        select(JmapUpload.type, JmapUpload.size, Blob.user_id)
        .join(Blob, Blob.sha256 == JmapUpload.sha256)
        .where(
            JmapUpload.user_id == user_id,
            JmapUpload.sha256 == sha256,
            or_(JmapUpload.expires_at.is_(None), JmapUpload.expires_at > now),
        )
        .order_by(JmapUpload.id.desc())
        .limit(1)
    ).first()
    if row is None:
        return None
    if row.user_id is not None:  # sealed: opened whole, never streamed from the table
        content = blob_bytes(session, sha256)
        return None if content is None else FoundBlob(None, len(content), content, row.type)
    return FoundBlob(sha256, row.size, None, row.type)


def _part_of(sha256: str, size: int, session: Session, path: str) -> FoundBlob | None:
    """One decoded MIME part (IMAP part number ``path``) of the stored bytes ``sha256``."""
    with heavy_work(size):
        data = blob_bytes(session, sha256)
        if data is None:
            return None
        structure = parse_structure(0, data)
        part = find_part(structure, path)
        if part is None:
            return None
        content = part_content(structure, part)
    return FoundBlob(None, len(content), content, part.ctype, part.filename)


def _message_part(
    session: Session, user_id: int, message_id: int, path: str | None
) -> FoundBlob | None:
    """A message's raw bytes (``path`` None) or one decoded part of it."""
    row = session.execute(
        select(Blob.sha256, Blob.size, Blob.user_id)
        .join(Message, Message.raw_sha256 == Blob.sha256)
        .where(Message.id == message_id, Message.user_id == user_id)
    ).first()
    if row is None:
        return None
    if path is None:
        if row.user_id is not None:  # sealed: opened whole, never streamed from the table
            content = blob_bytes(session, row.sha256)
            if content is None:
                return None
            return FoundBlob(None, len(content), content, "message/rfc822")
        return FoundBlob(row.sha256, row.size, None, "message/rfc822")
    return _part_of(row.sha256, row.size, session, path)


def find_blob(session: Session, user_id: int, blob_id: object) -> FoundBlob | None:
    """What ``blob_id`` names for ``user_id`` (raw bytes by digest, parts decoded), or None."""
    sha256 = ids.parse_upload_blob(blob_id)
    if sha256 is not None:
        return _upload(session, user_id, sha256, utcnow())
    upload_part = ids.parse_upload_part(blob_id)
    if upload_part is not None:
        upload = _upload(session, user_id, upload_part[0], utcnow())
        if upload is None:
            return None
        return _part_of(upload_part[0], upload.size, session, upload_part[1])
    parsed = ids.parse_blob(blob_id)
    if parsed is None:
        return None
    message_id, path = parsed
    return _message_part(session, user_id, message_id, path)


def blob_data(session: Session, found: FoundBlob) -> bytes | None:
    """The bytes of a found blob (read from ``blobs`` unless already decoded)."""
    if found.content is not None:
        return found.content
    return None if found.sha256 is None else blob_bytes(session, found.sha256)


def read_blob(session: Session, user_id: int, blob_id: object) -> tuple[bytes, str] | None:
    """The bytes and media type of ``blob_id`` as ``user_id`` may see it, or None."""
    found = find_blob(session, user_id, blob_id)
    if found is None:
        return None
    data = blob_data(session, found)
    return None if data is None else (data, found.media_type)
