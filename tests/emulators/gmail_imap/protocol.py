"""Reading IMAP commands and writing IMAP values: the syntax half of the emulator.

:func:`read_command` reads one command from a client, literals included
(``{n}`` gets a continuation request, ``{n+}`` does not: LITERAL+), and
:func:`parse` splits it into tokens: atoms (``str``), quoted strings and
literals (:class:`Text`) and parenthesized lists (``list``). :func:`quote` and
:func:`astring` write values back; :func:`parse_set` reads sequence sets.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import BinaryIO

__all__ = ["Text", "astring", "parse", "parse_set", "quote", "read_command"]

MAX_LITERAL = 64 * 1024 * 1024
_LITERAL = re.compile(rb"\{(\d+)(\+?)\}\r?\n$")


class Text(bytes):
    """A quoted string or literal (as opposed to an atom)."""


def read_command(reader: BinaryIO, go_ahead: Callable[[], None]) -> bytes | None:
    """One command with its literals inlined as ``{n}\\r\\n<bytes>``; None at EOF."""
    parts: list[bytes] = []
    while True:
        line = reader.readline(MAX_LITERAL)
        if not line:
            return None
        match = _LITERAL.search(line)
        if match is None:
            parts.append(line.rstrip(b"\r\n"))
            return b"".join(parts)
        size = int(match.group(1))
        if size > MAX_LITERAL:
            raise ValueError("literal too large")
        if not match.group(2):
            go_ahead()
        parts.append(line[: match.start()] + b"{%d}\r\n" % size + reader.read(size))


_ATOM_END = b' ()"{\r\n'


def parse(data: bytes) -> list[object]:
    """Tokens of a command line (atoms as ``str``, strings as :class:`Text`, lists)."""
    stack: list[list[object]] = [[]]
    i = 0
    while i < len(data):
        char = data[i : i + 1]
        if char == b" ":
            i += 1
        elif char == b"(":
            stack.append([])
            i += 1
        elif char == b")":
            if len(stack) == 1:
                raise ValueError("unbalanced parenthesis")
            done = stack.pop()
            stack[-1].append(done)
            i += 1
        elif char == b'"':
            out = bytearray()
            i += 1
            while i < len(data) and data[i : i + 1] != b'"':
                if data[i : i + 1] == b"\\":
                    i += 1
                out += data[i : i + 1]
                i += 1
            if i >= len(data):
                raise ValueError("unterminated string")
            stack[-1].append(Text(bytes(out)))
            i += 1
        elif char == b"{":
            end = data.index(b"}\r\n", i)
            size = int(data[i + 1 : end])
            start = end + 3
            stack[-1].append(Text(data[start : start + size]))
            i = start + size
        else:
            start = i
            while i < len(data) and data[i] not in _ATOM_END:
                if data[i : i + 1] == b"[":  # BODY[HEADER.FIELDS (A B)] is one atom
                    close = data.index(b"]", i)
                    i = close
                i += 1
            stack[-1].append(data[start:i].decode("utf-8", "replace"))
    if len(stack) != 1:
        raise ValueError("unbalanced parenthesis")
    return stack[0]


def quote(value: str | bytes) -> bytes:
    """A quoted string (a literal when it holds CR, LF or 8-bit bytes)."""
    raw = value.encode() if isinstance(value, str) else value
    if any(b > 0x7E or b in (0x0D, 0x0A) for b in raw):
        return b"{%d}\r\n" % len(raw) + raw
    return b'"' + raw.replace(b"\\", b"\\\\").replace(b'"', b'\\"') + b'"'


def astring(value: str) -> bytes:
    """An atom when the value can be one, else a quoted string."""
    if value and re.fullmatch(r"[\\A-Za-z0-9$_.\-/&+,;!#%*'`~|^=<>:@?]+", value):
        return value.encode()
    return quote(value)


def parse_set(text: str, highest: int, candidates: Iterable[int]) -> set[int]:
    """The ``candidates`` a sequence set names (``*`` is ``highest``)."""
    ranges: list[tuple[int, int]] = []
    for part in text.split(","):
        low, colon, high = part.partition(":")
        a = highest if low == "*" else int(low)
        b = a if not colon else (highest if high == "*" else int(high))
        ranges.append((min(a, b), max(a, b)))
    return {c for c in candidates if any(a <= c <= b for a, b in ranges)}
