"""Which stored message an IMAP message is: the provider id of IMAP mail.

IMAP names a message by (folder, UIDVALIDITY, UID), and that name changes when
another client moves it, and for a whole folder when UIDVALIDITY changes. The
provider id must survive both, so it is built from the message itself:

* ``mid:<Message-ID>:<size>`` — the normalized Message-ID header (angle brackets
  and whitespace stripped, case kept) plus the RFC822.SIZE the server reports.
  Both come from a cheap envelope fetch, so a moved or re-numbered message is
  recognised *without downloading it again*. The size separates messages that
  share a Message-ID but differ in content (a copy in Sent and the delivered
  copy with its Received headers; a resent message; a broken mailer reusing
  ids). Very long Message-IDs are hashed: ``midh:<sha256>:<size>``.
* ``sha256:<hex of the raw bytes>`` — for a message without a Message-ID. It
  needs the bytes, so such a message is downloaded once more when it moves
  (it is still recognised and re-located, never stored twice).

The same id in two folders is one message with two locations (like a Gmail
message with two labels), which is what a COPY means. Two messages with the
same Message-ID *and* the same size but different bytes would be taken as one;
that is accepted as vanishingly rare.
"""

from __future__ import annotations

import hashlib
import re

from mailroom.mime.msgids import normalize_message_id

__all__ = ["ENVELOPE_ITEMS", "MESSAGE_ID_ITEM", "hash_id", "message_id_from_header", "provider_id"]

MESSAGE_ID_ITEM = "BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)]"
MESSAGE_ID_KEY = b"BODY[HEADER.FIELDS (MESSAGE-ID)]"
ENVELOPE_ITEMS = ("UID", "FLAGS", "INTERNALDATE", "RFC822.SIZE", MESSAGE_ID_ITEM)
MAX_READABLE_ID = 400

_FOLD = re.compile(rb"\r?\n[ \t]+")


def message_id_from_header(block: bytes | None) -> str | None:
    """The normalized Message-ID from a ``HEADER.FIELDS (MESSAGE-ID)`` block, if any."""
    if not block:
        return None
    unfolded = _FOLD.sub(b" ", block)
    for line in unfolded.splitlines():
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == b"message-id":
            return normalize_message_id(value.decode("latin-1").strip())
    return None


def provider_id(message_id: str | None, size: int) -> str | None:
    """The provider id of a message with this Message-ID and size; None without a Message-ID."""
    if not message_id:
        return None
    if len(message_id) <= MAX_READABLE_ID:
        return f"mid:{message_id}:{size}"
    digest = hashlib.sha256(message_id.encode("utf-8", "surrogateescape")).hexdigest()
    return f"midh:{digest}:{size}"


def hash_id(raw: bytes) -> str:
    """The provider id of a message without a Message-ID: the SHA-256 of its bytes."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def parse_provider_id(value: str) -> tuple[str | None, int | None]:
    """(Message-ID, size) of a ``mid:`` provider id; (None, None) for other kinds."""
    if value.startswith("mid:"):
        body, _, size = value[4:].rpartition(":")
        if body and size.isdigit():
            return body, int(size)
    return None, None
