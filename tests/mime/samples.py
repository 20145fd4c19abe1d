"""Hand-made sample messages shared by the mime tests (files in data/ plus builders)."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from mailroom.mime import ParsedMessage

PART_PATH = re.compile(r"[1-9][0-9]*(?:\.[1-9][0-9]*)*")
DATA = Path(__file__).resolve().parent / "data"


def sample(name: str) -> bytes:
    """The bytes of ``data/<name>.eml``."""
    return (DATA / f"{name}.eml").read_bytes()


def all_samples() -> list[bytes]:
    """Every sample message in ``data/``, in name order."""
    return [p.read_bytes() for p in sorted(DATA.glob("*.eml"))]


def message(headers: str, body: bytes | str = b"Hello.\n", *, crlf: bool = False) -> bytes:
    """Build raw message bytes from a header block (text) and a body."""
    head = headers.strip("\n").encode("utf-8", "surrogateescape")
    raw_body = body.encode("utf-8") if isinstance(body, str) else body
    raw = head + b"\n\n" + raw_body
    return raw.replace(b"\n", b"\r\n") if crlf else raw


def _clean(value: str) -> None:
    assert isinstance(value, str)
    assert "\x00" not in value
    value.encode("utf-8")  # no lone surrogates


def check_invariants(parsed: ParsedMessage, raw: bytes) -> None:
    """Assert every documented invariant of a ParsedMessage built from ``raw``."""
    assert parsed.size == len(raw)
    for text in (parsed.subject, parsed.text_body, parsed.preview):
        _clean(text)
    for optional in (parsed.html_body, parsed.sanitized_html, parsed.message_id):
        if optional is not None:
            _clean(optional)
    assert (parsed.html_body is None) == (parsed.sanitized_html is None)
    assert len(parsed.preview) <= 256
    assert "\n" not in parsed.subject
    addresses = [*parsed.from_, *parsed.to, *parsed.cc, *parsed.bcc, *parsed.reply_to]
    if parsed.sender is not None:
        addresses.append(parsed.sender)
    for address in addresses:
        _clean(address.name)
        _clean(address.email)
        assert address.email
    if parsed.date is not None:
        assert parsed.date.utcoffset() == timedelta(0)
    for ident in [*parsed.in_reply_to, *parsed.references]:
        _clean(ident)
        assert ident and "<" not in ident and ">" not in ident
        assert not any(c.isspace() for c in ident)
    assert len(parsed.in_reply_to) == len(set(parsed.in_reply_to))
    assert len(parsed.references) == len(set(parsed.references))
    assert len(parsed.headers) <= 1000
    for name, value in parsed.headers:
        _clean(name)
        _clean(value)
        assert "\r" not in value and "\n" not in value
    for attachment in parsed.attachments:
        assert PART_PATH.fullmatch(attachment.part_path), attachment
        assert attachment.size >= 0
        assert attachment.disposition in (None, "attachment", "inline")
        assert "/" in attachment.content_type
        if attachment.filename is not None:
            _clean(attachment.filename)
            assert "/" not in attachment.filename and "\\" not in attachment.filename
    assert len(parsed.notes) <= 50
    for note in parsed.notes:
        _clean(note)
