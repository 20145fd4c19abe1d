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
from collections.abc import Callable, Sequence
from typing import Any

from mailroom.crypto.fields import FieldCipher
from mailroom.crypto.seal_lane import SealedSoon, SealJob, seal_texts, seal_tokens

BODIES = "message_bodies"
BODY_TEXT_COLUMNS = ("text_body", "html_body", "sanitized_html")
BODY_JSON_COLUMNS = ("headers", "attachments")
BLOBS = "blobs"
BLOB_COLUMN = "data"
BLOB_KIND = "blob"


def seal_body_rows(
    cipher: FieldCipher, owner: int, rows: Sequence[dict[str, Any]]
) -> Callable[[], list[dict[str, Any]]]:
    """Start sealing every body column of these ``message_bodies`` insert rows.

    The values are sealed in the import's sealing lane, or here (``crypto.seal_lane``);
    the returned call gives copies of the rows with them sealed (waiting if need be).
    """
    jobs: list[SealJob] = []
    for row in rows:
        message_id = int(row["message_id"])
        for column in BODY_TEXT_COLUMNS:
            value = row.get(column)
            if value is not None:
                jobs.append((BODIES, column, message_id, str(value)))
        for column in BODY_JSON_COLUMNS:
            dumped = json.dumps(row.get(column) or [], ensure_ascii=False)
            jobs.append((BODIES, column, message_id, dumped))
    soon = SealedSoon(cipher, owner, jobs, seal_texts)

    def sealed_rows() -> list[dict[str, Any]]:
        texts = iter(soon.values())
        done: list[dict[str, Any]] = []
        for row in rows:
            sealed = dict(row, sealed=True)
            for column in BODY_TEXT_COLUMNS:
                if row.get(column) is not None:
                    sealed[column] = next(texts)
            for column in BODY_JSON_COLUMNS:
                sealed[column] = next(texts)
            done.append(sealed)
        return done

    return sealed_rows


def seal_blob_rows(
    cipher: FieldCipher, owner: int, rows: Sequence[dict[str, Any]]
) -> Callable[[], list[dict[str, Any]]]:
    """Start sealing the bytes of these ``blobs`` insert rows (``sha256``: the sealed key).

    As :func:`seal_body_rows`: in the lane when there is one; the returned call gives
    copies of the rows with their bytes sealed and the owner named.
    """
    jobs: list[SealJob] = [(BLOBS, BLOB_COLUMN, row["sha256"], row["data"]) for row in rows]
    soon = SealedSoon(cipher, owner, jobs, seal_tokens)

    def sealed_rows() -> list[dict[str, Any]]:
        return [
            dict(row, data=data, user_id=owner)
            for row, data in zip(rows, soon.values(), strict=True)
        ]

    return sealed_rows


def sealed_blob_key(cipher: FieldCipher, owner: int, sha256_hex: str) -> str:
    """The key of the owner's sealed copy of bytes whose SHA-256 is ``sha256_hex``."""
    return cipher.lookup_hash(owner, BLOB_KIND, sha256_hex)


def seal_blob_data(cipher: FieldCipher, owner: int, key: str, raw: bytes) -> bytes:
    """``raw`` sealed as ``blobs.data`` of the row ``key``."""
    return cipher.encrypt(owner, BLOBS, BLOB_COLUMN, key, raw)
