"""The one way to read message bodies and raw message bytes, sealed or clear.

Every reader of ``message_bodies`` columns and ``blobs.data`` goes through
here: a sealed row (``message_bodies.sealed``; a blob with a ``user_id``) is
opened with the session's :func:`~mailroom.crypto.sealing.mail_cipher`, a
clear row passes through unchanged, so a store holding both (sealing
switched on or off at some point) reads the same. A sealed value that does
not open (changed, or copied from another row or owner) raises
:class:`~mailroom.crypto.fields.FieldTampered`, a one-sentence
:class:`~mailroom.errors.ConfigError`; a sealed row read without a key
configured raises ConfigError as well. Ciphertext never reaches a reader.

:mod:`mailroom.crypto.mail_writing` seals them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.crypto.fields import from_text
from mailroom.crypto.mail_writing import (
    BLOB_COLUMN,
    BLOBS,
    BODIES,
    BODY_JSON_COLUMNS,
    BODY_TEXT_COLUMNS,
)
from mailroom.crypto.sealing import require_cipher
from mailroom.errors import SealedWithoutKeys
from mailroom.mime.msgids import normalize_message_id
from mailroom.store.models import Blob, Message, MessageBody

__all__ = [
    "BODY_COLUMNS",
    "ClearBody",
    "blob_bytes",
    "bodies_of",
    "columns_of",
    "body_of",
    "header_message_ids",
    "open_body",
    "open_column",
    "raw_message",
    "session_of",
]

BODY_COLUMNS = (*BODY_TEXT_COLUMNS, *BODY_JSON_COLUMNS)
_WHAT = "This message"


@dataclass(frozen=True, slots=True)
class ClearBody:
    """A message's bodies, header list and attachment list, opened."""

    message_id: int
    text_body: str = ""
    html_body: str | None = None
    sanitized_html: str | None = None
    headers: list[list[str]] = field(default_factory=list)
    attachments: list[dict[str, Any]] = field(default_factory=list)


def _json(value: Any) -> Any:
    """A JSON column's value as Python (raw SQL on SQLite gives its text)."""
    return json.loads(value) if isinstance(value, str | bytes) else value


def _sealed_text(value: Any) -> str:
    """The ``mrf1.`` text of a sealed value, from a text or a JSON column (string or its JSON)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if isinstance(value, str) and value.startswith('"'):
        value = json.loads(value)  # a JSON column read as its text
    return value if isinstance(value, str) else ""


def session_of(source: object) -> Session | None:
    """The SQLAlchemy session behind a store reader (``store.reader``), or the session itself."""
    if isinstance(source, Session):
        return source
    found = getattr(source, "session", None)
    return found if isinstance(found, Session) else None


def open_column(
    session: Session | None, owner: int, message_id: int, column: str, value: Any, sealed: bool
) -> Any:
    """One ``message_bodies`` column of one row as the reader sees it.

    Text columns give ``str`` (or None); ``headers`` and ``attachments`` give Python lists,
    whichever way the row was read (ORM, raw SQL on SQLite or PostgreSQL). ``session`` None
    (a bare file reader, no keys) reads clear rows only.
    """
    is_json = column in BODY_JSON_COLUMNS
    if not sealed or value is None:
        return (_json(value) if value is not None else []) if is_json else value
    if session is None:
        raise SealedWithoutKeys(
            f"{_WHAT} is sealed and this store was opened without its keys; read it through "
            "mailroom with MAILROOM_MASTER_KEY_FILE set."
        )
    cipher = require_cipher(session, _WHAT)
    token = from_text(_sealed_text(value))
    plain = cipher.decrypt_text(owner, BODIES, column, message_id, token)
    return json.loads(plain) if is_json else plain


def open_body(session: Session, owner: int, row: Any) -> ClearBody:
    """A ``message_bodies`` row (ORM object or a row with its columns and ``sealed``), opened."""
    message_id = int(row.message_id)
    sealed = bool(row.sealed)
    values = {
        column: open_column(session, owner, message_id, column, getattr(row, column), sealed)
        for column in BODY_COLUMNS
    }
    values["text_body"] = values["text_body"] or ""
    return ClearBody(message_id, **values)


def bodies_of(
    session: Session, message_ids: Iterable[int], owner: int | None = None
) -> dict[int, ClearBody]:
    """The opened bodies of ``message_ids`` (of ``owner`` only, when given) by message id."""
    wanted = list(message_ids)
    if not wanted:
        return {}
    query = (
        select(Message.user_id, MessageBody)
        .join(Message, Message.id == MessageBody.message_id)
        .where(MessageBody.message_id.in_(wanted))
    )
    if owner is not None:
        query = query.where(Message.user_id == owner)
    return {
        body.message_id: open_body(session, int(user), body)
        for user, body in session.execute(query)
    }


def columns_of(
    session: Session,
    message_ids: Iterable[int],
    columns: Sequence[str],
    owner: int | None = None,
) -> dict[int, dict[str, Any]]:
    """Only ``columns`` of the bodies of ``message_ids`` (opened), by message id.

    For readers that need one or two columns (a header list, the text) of many messages.
    """
    wanted = list(message_ids)
    if not wanted:
        return {}
    unknown = [column for column in columns if column not in BODY_COLUMNS]
    if unknown:
        raise ValueError(f"message_bodies has no body column {unknown[0]!r}")
    table = MessageBody.__table__.c
    query = (
        select(table.message_id, table.sealed, Message.user_id, *(table[c] for c in columns))
        .join(Message, Message.id == table.message_id)
        .where(table.message_id.in_(wanted))
    )
    if owner is not None:
        query = query.where(Message.user_id == owner)
    found: dict[int, dict[str, Any]] = {}
    for row in session.execute(query):
        message_id, sealed, user = int(row[0]), bool(row[1]), int(row[2])
        found[message_id] = {
            column: open_column(session, user, message_id, column, value, sealed)
            for column, value in zip(columns, row[3:], strict=True)
        }
    return found


def header_message_ids(
    session: Session, message_ids: Iterable[int], owner: int | None = None
) -> dict[int, str]:
    """The normalized Message-ID of each message's stored header list, by message id.

    For a sealed message the one place its clear Message-ID is kept (its look-up
    columns and IMAP provider id hold keyed hashes); messages without one are left out.
    """
    found: dict[int, str] = {}
    for message_id, columns in columns_of(session, message_ids, ["headers"], owner).items():
        for entry in columns.get("headers") or []:
            if len(entry) == 2 and str(entry[0]).lower() == "message-id":
                value = normalize_message_id(str(entry[1] or ""))
                if value:
                    found[message_id] = value
                break
    return found


def body_of(session: Session, message_id: int, owner: int | None = None) -> ClearBody | None:
    """The opened body of one message (of ``owner`` only, when given), or None."""
    return bodies_of(session, [message_id], owner).get(message_id)


def open_blob(session: Session, key: str, data: bytes | None, owner: int | None) -> bytes | None:
    """One ``blobs`` row's data, opened when it is sealed (``owner`` is its ``user_id``)."""
    if data is None:
        return None
    if owner is None:
        return bytes(data)
    cipher = require_cipher(session, "This message's original")
    return cipher.decrypt(int(owner), BLOBS, BLOB_COLUMN, key, bytes(data))


def blob_bytes(session: Session, key: str) -> bytes | None:
    """The bytes stored under ``key`` (opened when sealed), or None when there are none."""
    row = session.execute(select(Blob.data, Blob.user_id).where(Blob.sha256 == key)).first()
    return None if row is None else open_blob(session, key, row.data, row.user_id)


def raw_message(session: Session, message_id: int, owner: int | None = None) -> bytes | None:
    """The original bytes of one message (of ``owner`` only, when given), or None."""
    query = select(Message.raw_sha256).where(Message.id == message_id)
    if owner is not None:
        query = query.where(Message.user_id == owner)
    key = session.scalar(query)
    return None if key is None else blob_bytes(session, key)
