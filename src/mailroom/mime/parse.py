"""Raw RFC 5322 bytes in, :class:`ParsedMessage` out, never an exception.

The stdlib parser runs with the ``compat32`` policy: on the SpamAssassin corpus it parses about
five times faster than ``email.policy.default``, whose header objects cost most of the time and
raise on some malformed headers. All header decoding is done here instead (see
:mod:`mailroom.mime.headers`, :mod:`mailroom.mime.addresses`, :mod:`mailroom.mime.msgids`).

Layers, each tried only if the previous one raised (it should not; this is the guarantee):
    1. full parse: headers, MIME tree, bodies, attachments;
    2. headers-only parse, the whole body read as plain text (note added);
    3. an empty record with ``size`` and a note.

Caps (each one hit adds a note):
    * headers: the first :data:`MAX_HEADERS` header fields are kept in ``headers``, and no more
      than :data:`MAX_HEADER_BYTES` characters of values in total; every value is cut at
      :data:`mailroom.mime.headers.MAX_HEADER_VALUE` characters. The well-known fields
      (Subject, From, Date, Message-ID, ...) are found even past the first 1000 fields.
    * MIME: see :mod:`mailroom.mime.structure` (1000 parts, 32 levels).
    * notes: at most :data:`MAX_NOTES`, duplicates removed.

Dates: ``Date`` is parsed as RFC 5322 (then ISO 8601 as a fallback) and converted to UTC; a
date without zone (or ``-0000``) is taken as UTC. When ``Date`` is missing or unparseable the
``received_at`` argument (naive means UTC) is used and the note
``"date: missing, used received time"`` is added.
"""

from __future__ import annotations

import html as _html
from datetime import UTC, datetime
from email.message import Message
from email.parser import BytesParser
from email.policy import compat32
from email.utils import parsedate_to_datetime

from mailroom.mime.addresses import Address, parse_address_list
from mailroom.mime.charsets import decode_bytes
from mailroom.mime.headers import MAX_HEADER_VALUE, decode_header_value, raw_header_text
from mailroom.mime.htmltext import html_to_text
from mailroom.mime.model import Attachment, ParsedMessage
from mailroom.mime.msgids import normalize_message_id, parse_id_list
from mailroom.mime.preview import make_preview
from mailroom.mime.sanitize import sanitize_html
from mailroom.mime.structure import (
    Part,
    build_tree,
    content_id,
    iter_parts,
    part_text,
    payload_bytes,
    select_bodies,
)

__all__ = ["parse_message", "MAX_HEADERS", "MAX_HEADER_BYTES", "MAX_NOTES"]

#: Header fields kept in ``ParsedMessage.headers``.
MAX_HEADERS = 1000
#: Total characters of header values kept in ``ParsedMessage.headers``.
MAX_HEADER_BYTES = 1 << 20
#: Notes kept per message.
MAX_NOTES = 50

_PARSER = BytesParser(policy=compat32)
_UTC = UTC
_ADDRESS_FIELDS = ("from", "sender", "to", "cc", "bcc", "reply-to")
_MULTI_FIELDS = frozenset({"to", "cc", "bcc"})  # several of these lines are merged
_WANTED = frozenset(
    {*_ADDRESS_FIELDS, "subject", "date", "message-id", "in-reply-to", "references"}
)


def _coerce(raw: object, notes: list[str]) -> bytes:
    if isinstance(raw, bytes):
        return raw
    try:
        if isinstance(raw, bytearray | memoryview):
            return bytes(raw)
        if isinstance(raw, str):
            notes.append("input: given text, not bytes; encoded as UTF-8")
            return raw.encode("utf-8", "surrogateescape")
    except Exception:
        pass
    notes.append(f"input: not bytes ({type(raw).__name__}), treated as empty")
    return b""


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    try:
        if value.tzinfo is None:
            return value.replace(tzinfo=_UTC)
        return value.astimezone(_UTC)
    except Exception:  # OverflowError near datetime.min/max, or not a datetime at all
        return None


def _parse_date(
    value: str | None, received_at: datetime | None, notes: list[str]
) -> datetime | None:
    parsed: datetime | None = None
    if value is not None and value.strip():
        text = " ".join(value.split())[:200]
        try:
            parsed = parsedate_to_datetime(text)
        except Exception:
            parsed = None
        if parsed is None:
            try:
                parsed = datetime.fromisoformat(text)
            except ValueError:
                parsed = None
        if parsed is not None:
            if parsed.tzinfo is None and "-0000" not in text:
                notes.append("date: no time zone, assumed UTC")
            parsed = _utc(parsed)
        if parsed is None:
            notes.append(f"date: unparseable value {text[:80]!r}")
    if parsed is not None:
        return parsed
    fallback = _utc(received_at)
    if fallback is not None:
        notes.append("date: missing, used received time")
    elif value is None or not value.strip():
        notes.append("date: missing")
    return fallback


class _Headers:
    """The header block: the capped decoded list, and raw values of the well-known fields."""

    __slots__ = ("items", "raw")

    def __init__(self, msg: Message, notes: list[str]) -> None:
        self.items: list[tuple[str, str]] = []
        self.raw: dict[str, list[str]] = {}
        total = 0
        count = 0
        truncated = 0
        for name, value in msg.raw_items():
            count += 1
            value = value if isinstance(value, str) else str(value)
            key = name.strip()
            lkey = key.lower()
            if len(value) > MAX_HEADER_VALUE:
                value = value[:MAX_HEADER_VALUE]
                truncated += 1
            if lkey in _WANTED:
                bucket = self.raw.setdefault(lkey, [])
                if not bucket or lkey in _MULTI_FIELDS:
                    bucket.append(value)
            if count <= MAX_HEADERS and total < MAX_HEADER_BYTES:
                decoded = decode_header_value(value, notes, f"header {key[:60]!r}: ")
                total += len(decoded)
                self.items.append((key, decoded))
        if truncated:
            notes.append(
                f"headers: {truncated} value(s) longer than {MAX_HEADER_VALUE} characters truncated"
            )
        if count > len(self.items):
            notes.append(
                f"headers: {count} header fields, only the first {len(self.items)} kept "
                f"(caps: {MAX_HEADERS} fields, {MAX_HEADER_BYTES} characters)"
            )

    def text(self, name: str, notes: list[str] | None = None) -> str | None:
        """Raw value(s) of a well-known field: 8-bit decoded, unfolded, encoded words kept."""
        values = self.raw.get(name)
        if not values:
            return None
        parts: list[str] = []
        for value in values:
            text, note = raw_header_text(value)
            if note is not None and notes is not None:
                notes.append(f"{name}: {note}")
            parts.append(text)
        return ", ".join(parts)


def _addresses(headers: _Headers, name: str, notes: list[str]) -> list[Address]:
    value = headers.text(name)
    if value is None:
        return []
    found = parse_address_list(value)
    if not found and "@" in value:  # an empty group or "<>" is legitimate, not a defect
        shown = " ".join(value.split())[:80]
        notes.append(f"{name}: no usable address in {shown!r}")
    return found


def _fill_headers(result: ParsedMessage, headers: _Headers, received_at: datetime | None) -> None:
    notes = result.notes
    result.headers = headers.items
    subject = headers.raw.get("subject")
    if subject:
        result.subject = " ".join(decode_header_value(subject[0]).split())
    result.from_ = _addresses(headers, "from", notes)
    if "from" not in headers.raw:
        notes.append("from: missing")
    senders = _addresses(headers, "sender", notes)
    result.sender = senders[0] if senders else None
    result.to = _addresses(headers, "to", notes)
    result.cc = _addresses(headers, "cc", notes)
    result.bcc = _addresses(headers, "bcc", notes)
    result.reply_to = _addresses(headers, "reply-to", notes)
    result.date = _parse_date(headers.text("date"), received_at, notes)
    mid = headers.text("message-id")
    result.message_id = normalize_message_id(mid) if mid is not None else None
    if result.message_id is None:
        notes.append("message-id: missing" if mid is None else "message-id: unusable value")
    result.in_reply_to = parse_id_list(headers.text("in-reply-to"))
    result.references = parse_id_list(headers.text("references"))


def _defect_notes(root: Part, notes: list[str]) -> None:
    """One note per kind of defect the stdlib parser recorded, naming (some of) the parts."""
    where: dict[str, list[str]] = {}
    for part in iter_parts(root):
        for defect in getattr(part.msg, "defects", ()):
            doc = (type(defect).__doc__ or type(defect).__name__).strip().splitlines()[0]
            paths = where.setdefault(doc.rstrip("."), [])
            name = f"part {part.path}" if part.path else "message"
            if name not in paths:
                paths.append(name)
    for doc, paths in where.items():
        shown = ", ".join(paths[:3])
        if len(paths) > 3:
            shown += f" and {len(paths) - 3} more parts"
        notes.append(f"{shown}: {doc}")


def _fill_body(result: ParsedMessage, msg: Message) -> None:
    notes = result.notes
    root = build_tree(msg, notes)
    text_parts, html_parts, attachment_parts = select_bodies(root)

    texts: list[str] = []
    for part in text_parts:
        text = part_text(part, notes)
        texts.append(html_to_text(text) if part.ctype == "text/html" else text)
    result.text_body = "\n".join(t for t in texts if t)
    html_texts = [p for p in html_parts if p.ctype == "text/html"]
    if not result.text_body.strip() and html_texts:
        # a blank text/plain alternative (common in bulk mail): derive the text from the HTML
        result.text_body = "\n".join(html_to_text(part_text(p, notes)) for p in html_texts)

    if any(p.ctype == "text/html" for p in html_parts):
        chunks: list[str] = []
        for part in html_parts:
            text = part_text(part, notes)
            if part.ctype == "text/html":
                chunks.append(text)
            elif text.strip():
                chunks.append(f"<pre>{_html.escape(text)}</pre>")
        result.html_body = "\n".join(chunks)
        result.sanitized_html = sanitize_html(result.html_body)

    attachments: list[Attachment] = []
    for part in attachment_parts:
        try:
            size = len(payload_bytes(part, notes))
        except Exception:
            size = 0
            notes.append(f"{part.where}payload could not be decoded")
        attachments.append(
            Attachment(
                filename=part.filename,
                content_type=part.ctype,
                size=size,
                content_id=content_id(part),
                disposition=part.disposition,
                part_path=part.path,
            )
        )
    result.attachments = attachments
    _defect_notes(root, notes)


def _finish(result: ParsedMessage) -> ParsedMessage:
    try:
        result.preview = make_preview(result.text_body, result.html_body)
    except Exception:  # pragma: no cover - make_preview does not raise
        result.preview = ""
    seen: set[str] = set()
    unique: list[str] = []
    for note in result.notes:
        if note not in seen:
            seen.add(note)
            unique.append(note)
    if len(unique) > MAX_NOTES:
        dropped = len(unique) - (MAX_NOTES - 1)
        unique = unique[: MAX_NOTES - 1] + [f"notes: {dropped} more notes not kept"]
    result.notes = unique
    return result


def _parse_full(data: bytes, received_at: datetime | None, notes: list[str]) -> ParsedMessage:
    result = ParsedMessage(size=len(data), notes=notes)
    msg = _PARSER.parsebytes(data)
    _fill_headers(result, _Headers(msg, notes), received_at)
    _fill_body(result, msg)
    return _finish(result)


def _parse_headers_only(
    data: bytes, received_at: datetime | None, notes: list[str]
) -> ParsedMessage:
    result = ParsedMessage(size=len(data), notes=notes)
    msg = _PARSER.parsebytes(data, headersonly=True)
    _fill_headers(result, _Headers(msg, notes), received_at)
    payload = getattr(msg, "_payload", None)  # raw: get_payload() decodes 8-bit with "replace"
    if isinstance(payload, str):
        body = payload.encode("ascii", "surrogateescape")
        text, note = decode_bytes(body, None)
        if note is not None:
            notes.append(f"body: {note}")
        result.text_body = text.replace("\r\n", "\n")
    return _finish(result)


def parse_message(raw: bytes, *, received_at: datetime | None = None) -> ParsedMessage:
    """Parse one raw RFC 5322 message; never raises, whatever ``raw`` holds.

    ``received_at`` stands in for a missing or unparseable ``Date`` (with a note). Anything
    repaired, defective, or decoded by a fallback is described in ``ParsedMessage.notes``.
    """
    base: list[str] = []
    data = _coerce(raw, base)
    try:
        return _parse_full(data, received_at, list(base))
    except Exception as exc:
        failure = f"parser: full parse failed ({type(exc).__name__}); body read as plain text"
    try:
        return _parse_headers_only(data, received_at, [*base, failure])
    except Exception as exc:
        second = f"parser: headers could not be parsed either ({type(exc).__name__})"
    result = ParsedMessage(size=len(data), notes=[*base, failure, second])
    try:
        result.date = _utc(received_at)
    except Exception:  # pragma: no cover - defensive
        result.date = None
    return result
