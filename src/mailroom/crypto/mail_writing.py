"""Sealing new mail as it is written: message bodies and raw message bytes.

When :func:`~mailroom.crypto.sealing.seals_new_mail` holds for the session,
the writers of ``message_bodies`` and ``blobs`` pass their rows through
here:

* a ``message_bodies`` row gets its text, raw HTML and sanitized HTML sealed
  as text (``mrf1.`` + base64), its header and attachment lists dumped to JSON
  and sealed (the JSON column then holds that text as a JSON string), and
  ``sealed=True``; the associated data names ``message_bodies``, the column,
  the message id and the owner (``messages.user_id``);
* raw bytes are stored under a key that is the owner's keyed hash of their
  SHA-256 (:func:`sealed_blob_key`: 64 hex digits, never shared with another
  owner, equal for equal bytes of one owner so dedup still works), sealed with
  that key as the row id, with ``blobs.user_id`` naming the owner.
  ``blobs.size`` stays the clear size.

:mod:`mailroom.crypto.mail_reading` opens both.
"""

from __future__ import annotations

import json
from typing import Any

from mailroom.crypto.fields import FieldCipher, to_text

BODIES = "message_bodies"
BODY_TEXT_COLUMNS = ("text_body", "html_body", "sanitized_html")
BODY_JSON_COLUMNS = ("headers", "attachments")
BLOBS = "blobs"
BLOB_COLUMN = "data"
BLOB_KIND = "blob"


def seal_body_row(cipher: FieldCipher, owner: int, row: dict[str, Any]) -> dict[str, Any]:
    """A copy of a ``message_bodies`` insert row with every body column sealed."""
    message_id = int(row["message_id"])
    seal = cipher.sealer(owner)  # the owner's key looked up once for the row's five values
    sealed = dict(row)
    for column in BODY_TEXT_COLUMNS:
        value = row.get(column)
        if value is not None:
            sealed[column] = to_text(seal(BODIES, column, message_id, str(value)))
    for column in BODY_JSON_COLUMNS:
        dumped = json.dumps(row.get(column) or [], ensure_ascii=False)
        sealed[column] = to_text(seal(BODIES, column, message_id, dumped))
    sealed["sealed"] = True
    return sealed


def sealed_blob_key(cipher: FieldCipher, owner: int, sha256_hex: str) -> str:
    """The key of the owner's sealed copy of bytes whose SHA-256 is ``sha256_hex``."""
    return cipher.lookup_hash(owner, BLOB_KIND, sha256_hex)


def seal_blob_data(cipher: FieldCipher, owner: int, key: str, raw: bytes) -> bytes:
    """``raw`` sealed as ``blobs.data`` of the row ``key``."""
    return cipher.encrypt(owner, BLOBS, BLOB_COLUMN, key, raw)
