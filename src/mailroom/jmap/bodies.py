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
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import Message
from email.parser import BytesParser
from typing import Any

from mailroom.jmap import ids
from mailroom.jmap.header_forms import RAW_POLICY, header_property, raw_fields
from mailroom.mime.headers import raw_header_text
from mailroom.mime.structure import (
    Part,
    build_tree,
    content_id,
    header_params,
    iter_parts,
    jmap_bodies,
    part_text,
    payload_bytes,
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
# bodyStructure without bodyProperties also shows its tree, as major servers do.
DEFAULT_STRUCTURE_PROPERTIES = (*DEFAULT_BODY_PROPERTIES, "subParts")
BODY_PROPERTIES = frozenset({*DEFAULT_BODY_PROPERTIES, "headers", "subParts"})

_PARSER = BytesParser(policy=RAW_POLICY)

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
    # What decoding each part found wrong (by id of the part), for isEncodingProblem.
    part_notes: dict[int, list[str]] = field(default_factory=dict)

    def decoding_notes(self, part: Part) -> list[str]:
        """The list that collects the decoding problems of this part (the same every time)."""
        return self.part_notes.setdefault(id(part), [])


def parse_structure(message_id: int, raw: bytes) -> Structure:
    """Parse raw bytes into a :class:`Structure` (never raises for bad MIME)."""
    notes: list[str] = []
    msg = _PARSER.parsebytes(raw)
    root = build_tree(msg, notes)
    text_parts, html_parts, attachments = jmap_bodies(root)
    return Structure(message_id, root, text_parts, html_parts, attachments, notes)


def parse_header_block(raw: bytes) -> Message:
    """Only the top-level header fields of raw bytes, values kept raw (see ``header_forms``)."""
    return _PARSER.parsebytes(raw, headersonly=True)


def _first_header(msg: Message, name: str) -> str | None:
    value = msg.get(name)
    return None if value is None else raw_header_text(str(value))[0].strip() or None


def _charset(part: Part) -> str | None:
    """RFC 8621: the charset parameter, else us-ascii for text/* or no Content-Type, else null."""
    content_type = part.msg.get("content-type")
    if content_type is None:
        return "us-ascii"
    charset = header_params(raw_header_text(str(content_type))[0]).get("charset")
    if charset:
        return charset.strip()
    return "us-ascii" if part.ctype.startswith("text/") else None


def _disposition(part: Part) -> str | None:
    """The Content-Disposition value without parameters or CFWS, lower-cased."""
    value = _first_header(part.msg, "Content-Disposition")
    if value is None:
        return None
    token = value.split(";", 1)[0].strip().strip("\"'").lower()
    return part.disposition or token or None


def body_part(structure: Structure, part: Part, properties: Collection[str]) -> dict[str, Any]:
    """One EmailBodyPart with the requested properties (``header:`` forms included)."""
    multipart = part.children is not None
    out: dict[str, Any] = {}
    for name in properties:
        if name == "partId":
            out[name] = None if multipart else part.path
        elif name == "blobId":
            out[name] = None if multipart else ids.part_blob_id(structure.message_id, part.path)
        elif name == "size":
            notes = structure.decoding_notes(part)
            out[name] = 0 if multipart else len(payload_bytes(part, notes))
        elif name == "headers":
            out[name] = [{"name": k, "value": v} for k, v in raw_fields(part.msg)]
        elif name.startswith("header:"):
            out[name] = header_property(name).pick(raw_fields(part.msg))
        elif name == "name":
            out[name] = part.filename
        elif name == "type":
            out[name] = part.ctype
        elif name == "charset":
            out[name] = _charset(part)
        elif name == "disposition":
            out[name] = _disposition(part)
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


def _cut(text: str, limit: int, html: bool) -> tuple[str, bool]:
    """At most ``limit`` UTF-8 octets of ``text``, cut between characters (and, in HTML, tags)."""
    # A character is at least one byte: cut the characters first so that a
    # huge body is never encoded whole just to measure it.
    truncated = len(text) > limit
    if truncated:
        text = text[:limit]
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) > limit:
        truncated = True
        text = encoded[:limit].decode("utf-8", "ignore")
    if truncated and html:
        opened = text.rfind("<")
        if opened > text.rfind(">"):  # RFC 8621 §4.2: not inside a tag
            text = text[:opened]
    return text, truncated


def body_value(structure: Structure, part: Part, max_bytes: int) -> dict[str, Any]:
    """The EmailBodyValue of a text part, truncated to ``max_bytes`` UTF-8 bytes.

    0 means the client set no limit: the server's
    :data:`DEFAULT_MAX_BODY_VALUE_BYTES` applies. ``isEncodingProblem`` is
    true when the transfer encoding or the charset did not decode cleanly.
    """
    limit = max_bytes or DEFAULT_MAX_BODY_VALUE_BYTES
    notes = structure.decoding_notes(part)
    text, truncated = _cut(part_text(part, notes), limit, part.ctype == "text/html")
    return {"value": text, "isEncodingProblem": bool(notes), "isTruncated": truncated}


def text_leaves(structure: Structure) -> list[Part]:
    """Every text/* leaf of the tree in document order (``fetchAllBodyValues``)."""
    return [
        p for p in iter_parts(structure.root) if p.children is None and p.ctype.startswith("text/")
    ]


def find_part(structure: Structure, path: str) -> Part | None:
    """The leaf part with this IMAP part number."""
    for part in iter_parts(structure.root):
        if part.path == path and part.children is None:
            return part
    return None


def part_content(structure: Structure, part: Part) -> bytes:
    """The decoded bytes of a leaf part (what its blob downloads)."""
    return payload_bytes(part, structure.decoding_notes(part))
