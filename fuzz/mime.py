"""Fuzz the MIME parser: ``parse_message`` takes any bytes, never raises, gives storable text.

Contract (``mailroom.mime.parse`` and ``mailroom.mime.charsets``): raw bytes
in, a ``ParsedMessage`` out, never an exception; ``size`` is the input's
length; notes are capped; the preview is at most 256 characters; a date is
in UTC; every text holds no U+0000 and encodes as UTF-8 (PostgreSQL refuses
NUL in text, and a lone surrogate cannot be stored); the sanitized HTML
(the only HTML pages show) holds no script element.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from fuzz.runner import Check, run


def texts(parsed: Any) -> Iterator[str]:
    """Every text of a parsed message that the store keeps."""
    yield parsed.subject
    yield parsed.text_body
    yield parsed.preview
    yield from (value for value in (parsed.html_body, parsed.sanitized_html) if value)
    yield from (value for value in (parsed.message_id,) if value)
    yield from parsed.in_reply_to
    yield from parsed.references
    yield from parsed.notes
    for name, value in parsed.headers:
        yield name
        yield value
    people = [*parsed.from_, *parsed.to, *parsed.cc, *parsed.bcc, *parsed.reply_to]
    if parsed.sender is not None:
        people.append(parsed.sender)
    for address in people:
        yield address.name or ""
        yield address.email or ""
    for attachment in parsed.attachments:
        for value in (attachment.filename, attachment.content_type, attachment.content_id):
            if value:
                yield value


def load() -> Check:
    """Import the parser (instrumented under atheris) and return the check."""
    from mailroom.mime.model import ParsedMessage
    from mailroom.mime.parse import MAX_NOTES, parse_message

    def check(data: bytes) -> None:
        parsed = parse_message(data)
        assert isinstance(parsed, ParsedMessage)
        assert parsed.size == len(data), (parsed.size, len(data))
        assert len(parsed.notes) <= MAX_NOTES
        assert len(parsed.preview) <= 256
        assert parsed.date is None or parsed.date.utcoffset() == timedelta(0), parsed.date
        for text in texts(parsed):
            assert isinstance(text, str) and "\x00" not in text, repr(text)[:200]
            text.encode("utf-8")
        if parsed.sanitized_html:
            assert "<script" not in parsed.sanitized_html.lower(), parsed.sanitized_html[:200]

    return check


if __name__ == "__main__":
    run("mime", load, ("mailroom.mime",))
