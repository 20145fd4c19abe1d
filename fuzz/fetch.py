"""Fuzz the IMAP FETCH reader: ``read_fetch`` gives UID → items or ``MalformedFetch``.

Contract (``mailroom.providers.imap.fetchparse``):

* ``read_fetch`` (what ``ImapConnection.fetch`` uses) returns a dict of
  UID → {item: value} or raises ``MalformedFetch``, never anything else, and
  no INTERNALDATE it returns raises when used (``usable_date``);
* where the fast reader ``parse_fetch`` reads a response and IMAPClient's
  ``parse_fetch_response(data, False, True)`` reads it too, both agree.
  (The fast reader may read a little more than IMAPClient accepts, e.g. an
  INTERNALDATE that is a number, which makes IMAPClient's parser fail.)

The input bytes become the list imaplib hands over: items split at NUL; an
item holding a 0x01 byte is a ``(text, literal)`` pair split there.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fuzz.runner import Check, run


def response_data(data: bytes) -> list[Any]:
    """The FETCH response items the fuzz input describes."""
    items: list[Any] = []
    for part in data.split(b"\x00"):
        text, marker, literal = part.partition(b"\x01")
        items.append((text, literal) if marker else text)
    return items


def load() -> Check:
    """Import the readers (ours instrumented under atheris) and return the check."""
    from imapclient.response_parser import parse_fetch_response

    from mailroom.providers.imap.fetchparse import (
        MalformedFetch,
        parse_fetch,
        read_fetch,
        usable_date,
    )

    def check(data: bytes) -> None:
        items = response_data(data)
        try:
            found = read_fetch(items)
        except MalformedFetch:
            return
        assert isinstance(found, dict)
        for values in found.values():
            when = values.get(b"INTERNALDATE")
            if isinstance(when, datetime):
                when.utcoffset()  # raises for a date no code can use
        fast = parse_fetch(items)
        if fast is None:
            return
        try:
            parsed = parse_fetch_response(items, False, True)
            slow = {int(k): dict(v) for k, v in parsed.items()}
        except Exception:  # noqa: BLE001 - IMAPClient is stricter: nothing to compare
            return
        for values in slow.values():
            if b"INTERNALDATE" in values:
                values[b"INTERNALDATE"] = usable_date(values[b"INTERNALDATE"])
        assert fast == slow, (fast, slow)

    return check


if __name__ == "__main__":
    run("fetch", load, ("mailroom.providers.imap.fetchparse",))
