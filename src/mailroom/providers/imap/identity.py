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
* ``midk:<keyed hash>:<size>`` — the same for an owner whose mail is sealed
  (``MAILROOM_ENCRYPT_MAIL``): the Message-ID is the owner's keyed hash (32 hex
  digits of ``lookup_hash(owner, "imap-provider-id", Message-ID)``), since a
  Message-ID in clear names the sender's host and often the correspondents.
  Equal ids still hash equal, so recognising a moved message works the same;
  the hash needs the owner's key, so :mod:`.namer` makes these ids (and every
  form an id may be stored in), and this module only formats and parses them.
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

__all__ = [
    "ENVELOPE_ITEMS",
    "KEYED_PREFIX",
    "MESSAGE_ID_ITEM",
    "hash_id",
    "keyed_provider_id",
    "message_id_from_header",
    "message_id_of_raw",
    "named_by_message_id",
    "parse_provider_id",
    "provider_id",
    "size_of",
]

MESSAGE_ID_ITEM = "BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)]"
MESSAGE_ID_KEY = b"BODY[HEADER.FIELDS (MESSAGE-ID)]"
ENVELOPE_ITEMS = ("UID", "FLAGS", "INTERNALDATE", "RFC822.SIZE", MESSAGE_ID_ITEM)
MAX_READABLE_ID = 400
CLEAR_PREFIX = "mid:"
LONG_PREFIX = "midh:"
KEYED_PREFIX = "midk:"
KEYED_CHARS = 32  # hex digits of the keyed hash kept: 128 bits
_BY_MESSAGE_ID = (CLEAR_PREFIX, LONG_PREFIX, KEYED_PREFIX)
_HEADER_END = re.compile(rb"\r?\n\r?\n")

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


def message_id_of_raw(raw: bytes) -> str | None:
    """The normalized Message-ID of a whole message's header (what the server reports)."""
    end = _HEADER_END.search(raw)
    return message_id_from_header(raw[: end.start()] if end else raw)


def provider_id(message_id: str | None, size: int) -> str | None:
    """The provider id of a message with this Message-ID and size; None without a Message-ID."""
    if not message_id:
        return None
    if len(message_id) <= MAX_READABLE_ID:
        return f"{CLEAR_PREFIX}{message_id}:{size}"
    digest = hashlib.sha256(message_id.encode("utf-8", "surrogateescape")).hexdigest()
    return f"{LONG_PREFIX}{digest}:{size}"


def keyed_provider_id(digest: str, size: int) -> str:
    """The provider id of a sealing owner's message, from the keyed hash of its Message-ID."""
    return f"{KEYED_PREFIX}{digest[:KEYED_CHARS]}:{size}"


def hash_id(raw: bytes) -> str:
    """The provider id of a message without a Message-ID: the SHA-256 of its bytes."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def parse_provider_id(value: str) -> tuple[str | None, int | None]:
    """(Message-ID, size) of a ``mid:`` provider id; (None, None) for other kinds."""
    if value.startswith(CLEAR_PREFIX):
        body, _, size = value[len(CLEAR_PREFIX) :].rpartition(":")
        if body and size.isdigit():
            return body, int(size)
    return None, None


def named_by_message_id(value: str) -> bool:
    """Whether a provider id is made from a Message-ID (``mid:``, ``midh:`` or ``midk:``)."""
    return value.startswith(_BY_MESSAGE_ID)


def size_of(value: str) -> int | None:
    """The size a provider id made from a Message-ID names; None for other kinds."""
    if not named_by_message_id(value):
        return None
    _, _, size = value.rpartition(":")
    return int(size) if size.isdigit() else None
