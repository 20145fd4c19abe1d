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

__all__ = ["parse_fetch"]

_TOKEN = re.compile(
    rb"""[ \t\r\n]*(?:
        (?P<open>\()
      | (?P<close>\))
      | (?P<quoted>"(?:[^"\\]|\\.)*")
      | (?P<atom>[^\s()"\[\]{]+(?:\[[^\]]*\][^\s()"]*)?)
      | (?P<literal>\{[0-9]+\}$)
    )""",
    re.VERBOSE,
)
_TRAILING_SPACE = re.compile(rb"[ \t\r\n]*")
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
        return text[1:-1], index + 1
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
        return parsed
    except ValueError:
        return None


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
