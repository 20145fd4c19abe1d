"""Fuzz the MIME parser: ``parse_message`` takes any bytes and never raises.

Contract (``mailroom.mime.parse``): raw bytes in, a ``ParsedMessage`` out,
never an exception; ``size`` is the input's length; notes are capped.
"""

from __future__ import annotations

from fuzz.runner import Check, run


def load() -> Check:
    """Import the parser (instrumented under atheris) and return the check."""
    from mailroom.mime.model import ParsedMessage
    from mailroom.mime.parse import MAX_NOTES, parse_message

    def check(data: bytes) -> None:
        parsed = parse_message(data)
        assert isinstance(parsed, ParsedMessage)
        assert parsed.size == len(data), (parsed.size, len(data))
        assert len(parsed.notes) <= MAX_NOTES
        assert isinstance(parsed.subject, str)

    return check


if __name__ == "__main__":
    run("mime", load, ("mailroom.mime",))
