"""A fast reader for UID FETCH responses of the shapes the importer asks for.

IMAPClient's response parser reads every response character by character
in Python; on an import it cost about as much CPU as storing the messages'
search index. This reader splits the response with one regular expression
and gives the same result as ``imapclient.response_parser.parse_fetch_response``
(with ``normalise_times=False, uid_is_key=True``) for responses made of
numbers, atoms, quoted strings, NIL, parenthesized lists and literals — which
covers UID, FLAGS, INTERNALDATE, RFC822.SIZE, MODSEQ and BODY[...] sections.
For anything else (ENVELOPE, BODYSTRUCTURE, a malformed response) it returns
None and the caller uses IMAPClient's parser, so nothing it cannot read is
ever guessed at.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from imapclient.datetime_util import parse_to_datetime  # type: ignore[import-untyped]
from imapclient.response_parser import parse_fetch_response  # type: ignore[import-untyped]

__all__ = ["MalformedFetch", "parse_fetch", "read_fetch", "usable_date"]

# Spaces are IMAPClient's four; an atom stops where IMAPClient's lexer stops one (a
# control character or ``%`` is a token of its own there), so a response with those
# outside quotes or brackets matches nothing and is left to IMAPClient (fuzz/fetch.py).
_TOKEN = re.compile(
    rb"""[ \t\r\n]*(?:
        (?P<open>\()
      | (?P<close>\))
      | (?P<quoted>"(?:[^"\\]|\\.)*")
      | (?P<atom>[^ \t\r\n()"\[\]{%\x00-\x1f]+(?:\[[^\]]*\][^ \t\r\n()"\[\]{%\x00-\x1f]*)*)
      | (?P<literal>\{[0-9]+\}$)
    )""",
    re.VERBOSE,
)
_TRAILING_SPACE = re.compile(rb"[ \t\r\n]*")
# Inside a quoted string IMAPClient drops the backslash before ``"`` and ``\``.
_QUOTED_ESCAPE = re.compile(rb'\\(["\\])')
# Items IMAPClient turns into objects of its own; the fast path leaves them to it.
_CONVERTED = frozenset({b"ENVELOPE", b"BODY", b"BODYSTRUCTURE"})


class _Unsupported(Exception):
    """The response has a shape this reader leaves to IMAPClient."""


def _tokens(data: list[Any]) -> list[Any]:
    """Flat tokens: b"(", b")", ("atom", bytes), ("quoted", bytes), ("literal", bytes)."""
    out: list[Any] = []
    for item in data:
        if isinstance(item, tuple):
            if len(item) != 2 or not isinstance(item[0], bytes):
                raise _Unsupported
            text, literal = item
        elif isinstance(item, bytes):
            text, literal = item, None
        else:
            raise _Unsupported
        position, end, announced = 0, len(text), None
        while True:
            if _TRAILING_SPACE.match(text, position).end() == end:  # type: ignore[union-attr]
                break
            match = _TOKEN.match(text, position)
            if match is None:
                raise _Unsupported
            position = match.end()
            kind = match.lastgroup
            if kind == "open":
                out.append(b"(")
            elif kind == "close":
                out.append(b")")
            elif kind == "literal":
                announced = int(match.group("literal")[1:-1])
            elif kind is not None:
                if kind == "atom" and text[position : position + 1] == b"{":
                    raise _Unsupported  # IMAPClient reads "N{0}" as one atom, not N and a literal
                out.append((kind, match.group(kind)))
        if literal is not None:
            if not isinstance(literal, bytes) or announced != len(literal):
                raise _Unsupported
            out.append(("literal", literal))
        elif announced is not None:
            raise _Unsupported
    return out


def _value(tokens: list[Any], index: int) -> tuple[Any, int]:
    token = tokens[index]
    if token == b"(":
        items: list[Any] = []
        index += 1
        while index < len(tokens) and tokens[index] != b")":
            item, index = _value(tokens, index)
            items.append(item)
        if index >= len(tokens):
            raise _Unsupported
        return tuple(items), index + 1
    if token == b")":
        raise _Unsupported
    kind, text = token
    if kind == "literal":
        return text, index + 1
    if kind == "quoted":
        return _QUOTED_ESCAPE.sub(rb"\1", text[1:-1]), index + 1
    if text == b"NIL":
        return None, index + 1
    if text.isdigit() and (text[:1] != b"0" or len(text) == 1):
        return int(text), index + 1
    return text, index + 1


def _internaldate(value: Any) -> datetime | None:
    if not isinstance(value, bytes):
        return None
    try:
        parsed: datetime = parse_to_datetime(value, normalise=False)  # IMAPClient's reading
    except (ValueError, OverflowError):  # a year or offset of 20 digits (found by fuzzing)
        return None
    return parsed if usable_date(parsed) is not None else None


def usable_date(value: Any) -> Any:
    """``value``, or None for a date whose zone offset is a day or more (e.g. ``-9900``).

    IMAPClient builds such a datetime without complaint, but every use of it
    (comparing, ``astimezone``) raises ValueError; found by fuzzing
    (``fuzz/fetch.py``). Both readers give None instead, as for a missing date.
    """
    if isinstance(value, datetime):
        try:
            value.utcoffset()
        except ValueError:
            return None
    return value


def parse_fetch(data: list[Any]) -> dict[int, dict[bytes, Any]] | None:
    """UID → {item: value} like IMAPClient's parser, or None to let IMAPClient read it."""
    try:
        tokens = _tokens(data)
        result: dict[int, dict[bytes, Any]] = {}
        index = 0
        while index < len(tokens):
            sequence, index = _value(tokens, index)
            if not isinstance(sequence, int) or index >= len(tokens) or tokens[index] != b"(":
                return None
            values, index = _value(tokens, index)
            if len(values) % 2:
                return None
            key = sequence
            message: dict[bytes, Any] = {b"SEQ": sequence}
            for position in range(0, len(values), 2):
                name, value = values[position], values[position + 1]
                if not isinstance(name, bytes):
                    return None
                word = name.upper()
                if word in _CONVERTED:
                    return None
                if word == b"UID":
                    if not isinstance(value, int):
                        return None
                    key = value
                elif word == b"INTERNALDATE":
                    message[word] = _internaldate(value)
                else:
                    message[word] = value
            result.setdefault(key, {}).update(message)
        return result
    except (_Unsupported, IndexError, ValueError, TypeError):
        return None


class MalformedFetch(Exception):
    """A FETCH response that neither this reader nor IMAPClient's can read."""


def read_fetch(data: list[Any]) -> dict[int, dict[bytes, Any]]:
    """UID → {item: value}: the fast reader, else IMAPClient's; MalformedFetch if neither reads it.

    IMAPClient's parser answers a malformed response with whatever it runs
    into (ProtocolError, ValueError, AttributeError, ...; found by fuzzing,
    ``fuzz/fetch.py``); that becomes the one MalformedFetch here.
    """
    fast = parse_fetch(data)
    if fast is not None:
        return fast
    try:
        parsed = parse_fetch_response(data, False, True)
        found = {int(uid): dict(values) for uid, values in parsed.items()}
    except Exception as exc:  # noqa: BLE001 - any failure of the parser is a malformed response
        raise MalformedFetch(str(exc) or type(exc).__name__) from None
    for values in found.values():
        if b"INTERNALDATE" in values:
            values[b"INTERNALDATE"] = usable_date(values[b"INTERNALDATE"])
    return found
