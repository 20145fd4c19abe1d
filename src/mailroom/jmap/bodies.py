"""An Email's MIME structure as JMAP body parts (RFC 8621 §4.1.4), from the raw bytes.

The stored message keeps text, HTML and attachment metadata, but JMAP
clients ask for the part tree itself (``bodyStructure``, ``textBody``,
``htmlBody``, ``attachments``, ``bodyValues``), so it is rebuilt on demand
from the raw blob with the same tree and body choice the ingest used
(``mailroom.mime.structure``): part ids are IMAP part numbers ("1", "2.1"),
identical to the ``part`` of the stored attachment list. Only the messages
and properties asked for are parsed.

``bodyValues`` carry the part's decoded content as RFC 8621 defines it —
for HTML that is the sender's HTML, which a client must sanitize before
rendering (mailroom's own pages only ever show the sanitized copy).

Memory: a client that gives no ``maxBodyValueBytes`` gets values cut at
:data:`DEFAULT_MAX_BODY_VALUE_BYTES` (``isTruncated`` true; the whole part
is its blob download), and parsing a message larger than
:data:`HEAVY_MESSAGE_BYTES` waits for one of :data:`HEAVY_SLOTS` slots
(:func:`heavy_work`), so parallel requests for one 30 MB message cost a
few copies of it, not one per request.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import Message
from email.parser import BytesParser
from email.policy import compat32
from typing import Any

from mailroom.jmap import ids
from mailroom.mime.headers import raw_header_text
from mailroom.mime.structure import (
    Part,
    build_tree,
    content_id,
    iter_parts,
    part_text,
    payload_bytes,
    select_bodies,
)

DEFAULT_BODY_PROPERTIES = (
    "partId",
    "blobId",
    "size",
    "name",
    "type",
    "charset",
    "disposition",
    "cid",
    "language",
    "location",
)
BODY_PROPERTIES = frozenset({*DEFAULT_BODY_PROPERTIES, "headers", "subParts"})

_PARSER = BytesParser(policy=compat32)

# The server's cut for body values when the client sets no maxBodyValueBytes
# (RFC 8621 §4.2 leaves 0 to mean "no limit from the client"); a client that
# wants more asks for it explicitly, or downloads the part's blob.
DEFAULT_MAX_BODY_VALUE_BYTES = 1_000_000
# Parsing a message costs several times its size (the raw bytes, the parsed
# tree, the decoded text); above this size only HEAVY_SLOTS run at once.
HEAVY_MESSAGE_BYTES = 1_000_000
HEAVY_SLOTS = 2
_heavy = threading.BoundedSemaphore(HEAVY_SLOTS)


@contextmanager
def heavy_work(size: int) -> Iterator[None]:
    """Hold one of the few slots for parsing a large message (no wait for small ones)."""
    if size <= HEAVY_MESSAGE_BYTES:
        yield
        return
    with _heavy:
        yield


@dataclass
class Structure:
    """The part tree of one message and the parts JMAP shows as bodies and attachments."""

    message_id: int
    root: Part
    text_parts: list[Part]
    html_parts: list[Part]
    attachments: list[Part]
    notes: list[str] = field(default_factory=list)


def parse_structure(message_id: int, raw: bytes) -> Structure:
    """Parse raw bytes into a :class:`Structure` (never raises for bad MIME)."""
    notes: list[str] = []
    msg = _PARSER.parsebytes(raw)
    root = build_tree(msg, notes)
    text_parts, html_parts, attachments = select_bodies(root)
    return Structure(message_id, root, text_parts, html_parts, attachments, notes)


def _headers(msg: Message) -> list[dict[str, str]]:
    return [
        {"name": name, "value": raw_header_text(str(value))[0]} for name, value in msg.raw_items()
    ]


def _first_header(msg: Message, name: str) -> str | None:
    value = msg.get(name)
    return None if value is None else raw_header_text(str(value))[0].strip() or None


def body_part(
    structure: Structure, part: Part, properties: frozenset[str] | tuple[str, ...]
) -> dict[str, Any]:
    """One EmailBodyPart with the requested properties."""
    multipart = part.children is not None
    notes: list[str] = []
    out: dict[str, Any] = {}
    for name in properties:
        if name == "partId":
            out[name] = None if multipart else part.path
        elif name == "blobId":
            out[name] = None if multipart else ids.part_blob_id(structure.message_id, part.path)
        elif name == "size":
            out[name] = 0 if multipart else len(payload_bytes(part, notes))
        elif name == "headers":
            out[name] = _headers(part.msg)
        elif name == "name":
            out[name] = part.filename
        elif name == "type":
            out[name] = part.ctype
        elif name == "charset":
            charset = part.msg.get_content_charset() if part.ctype.startswith("text/") else None
            out[name] = charset or ("us-ascii" if part.ctype.startswith("text/") else None)
        elif name == "disposition":
            out[name] = part.disposition
        elif name == "cid":
            out[name] = content_id(part)
        elif name == "language":
            value = _first_header(part.msg, "Content-Language")
            out[name] = [v.strip() for v in value.split(",") if v.strip()] if value else None
        elif name == "location":
            out[name] = _first_header(part.msg, "Content-Location")
        elif name == "subParts":
            out[name] = (
                [body_part(structure, child, properties) for child in part.children or []]
                if multipart
                else None
            )
    return out


def body_value(part: Part, max_bytes: int) -> dict[str, Any]:
    """The EmailBodyValue of a text part, truncated to ``max_bytes`` UTF-8 bytes.

    0 means the client set no limit: the server's
    :data:`DEFAULT_MAX_BODY_VALUE_BYTES` applies.
    """
    limit = max_bytes or DEFAULT_MAX_BODY_VALUE_BYTES
    notes: list[str] = []
    text = part_text(part, notes)
    # A character is at least one byte: cut the characters first so that a
    # huge body is never encoded whole just to measure it.
    truncated = len(text) > limit
    if truncated:
        text = text[:limit]
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) > limit:
        truncated = True
        text = encoded[:limit].decode("utf-8", "ignore")
    problem = any("charset" in note or "decod" in note for note in notes)
    return {"value": text, "isEncodingProblem": problem, "isTruncated": truncated}


def find_part(structure: Structure, path: str) -> Part | None:
    """The leaf part with this IMAP part number."""
    for part in iter_parts(structure.root):
        if part.path == path and part.children is None:
            return part
    return None


def part_content(structure: Structure, part: Part) -> bytes:
    """The decoded bytes of a leaf part (what its blob downloads)."""
    return payload_bytes(part, structure.notes)
