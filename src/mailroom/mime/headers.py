"""Header field values: raw 8-bit bytes to text, unfolding, RFC 2047 encoded words, caps.

Invariants:
    * Nothing here raises on any input.
    * Raw 8-bit header bytes are decoded as UTF-8, then Windows-1252, then ISO-8859-1 (the
      first that succeeds; ISO-8859-1 always does). A note is produced when UTF-8 failed.
    * Encoded words (``=?charset?B|Q?text?=``) are decoded leniently: also when glued to
      surrounding text, with spaces inside Q text, with broken base64 padding, and with charset
      labels carrying an RFC 2231 ``*language`` suffix. Whitespace between two adjacent encoded
      words is dropped (RFC 2047 section 6.2), and adjacent words in the same charset are joined
      as bytes before decoding, so a multi-byte character split across two words survives.
      Charsets go through :func:`mailroom.mime.charsets.decode_bytes` (with its fallbacks).
    * Decoded values are unfolded and hold no CR, LF or NUL characters (each CR/LF that
      survives unfolding, or comes out of an encoded word, becomes a space).
    * A value longer than :data:`MAX_HEADER_VALUE` characters is truncated to that length
      before any decoding, so a 1 MB header line costs no more than a 64 KiB one.
"""

from __future__ import annotations

import binascii
import re

from mailroom.mime.charsets import clean_text, decode_bytes, decode_unlabelled

__all__ = [
    "MAX_HEADER_VALUE",
    "decode_encoded_words",
    "decode_header_value",
    "raw_header_text",
]

#: Longest header value (in characters, after unfolding) that is decoded; longer ones are cut.
MAX_HEADER_VALUE = 65536

_EW_RE = re.compile(r"=\?([^?\s]{1,80})\?([bBqQ])\?([^?]*)\?=")
_B64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_B64_DELETE = bytes(b for b in range(256) if b not in _B64_ALPHABET)
_CTRL_RE = re.compile(r"[\r\n\x00]")


def b64decode_lenient(data: bytes) -> tuple[bytes, bool]:
    """Decode base64, skipping junk characters and repairing padding; return (bytes, repaired).

    ``repaired`` is True when the padding or length had to be fixed (or nothing decodable was
    left). Characters outside the base64 alphabet are skipped silently, as every mail client
    does.
    """
    try:
        return binascii.a2b_base64(data), False
    except (binascii.Error, ValueError):
        pass
    stripped = data.translate(None, _B64_DELETE)
    rem = len(stripped) % 4
    if rem == 1:
        stripped = stripped[:-1]
    elif rem:
        stripped += b"=" * (4 - rem)
    try:
        return binascii.a2b_base64(stripped), True
    except (binascii.Error, ValueError):  # pragma: no cover - cannot happen after repair
        return b"", True


def _ew_bytes(encoding: str, text: str) -> bytes:
    raw = text.encode("ascii") if text.isascii() else text.encode("utf-8", "replace")
    if encoding in "bB":
        return b64decode_lenient(raw)[0]
    return binascii.a2b_qp(raw, header=True)


def decode_encoded_words(value: str, notes: list[str] | None = None, where: str = "") -> str:
    """Decode every RFC 2047 encoded word in ``value``; append fallback notes to ``notes``."""
    if "=?" not in value:
        return value
    out: list[str] = []
    pos = 0
    pend_cs: str | None = None
    pend: list[bytes] = []

    def flush() -> None:
        """Decode the pending run of same-charset encoded words."""
        nonlocal pend_cs
        if pend_cs is not None:
            text, note = decode_bytes(b"".join(pend), pend_cs)
            out.append(text)
            if note is not None and notes is not None:
                notes.append(f"{where}encoded word: {note}")
            pend.clear()
            pend_cs = None

    for m in _EW_RE.finditer(value):
        between = value[pos : m.start()]
        if pend_cs is None or (between and not between.isspace()):
            flush()
            out.append(between)
        charset = m.group(1).split("*", 1)[0].lower()
        data = _ew_bytes(m.group(2), m.group(3))
        if pend_cs is not None and pend_cs != charset:
            flush()
        pend_cs = charset
        pend.append(data)
        pos = m.end()
    flush()
    out.append(value[pos:])
    return "".join(out)


def raw_header_text(raw: str) -> tuple[str, str | None]:
    """Turn a header value as stored by the ``compat32`` parser into unfolded text.

    ``raw`` carries 8-bit bytes as surrogate escapes; they are decoded UTF-8, then
    Windows-1252, then ISO-8859-1. Returns ``(text, note)``; ``note`` is set only when UTF-8
    failed. Encoded words are left alone (address and id parsing must see them undecoded).
    """
    note: str | None = None
    if not raw.isascii():
        try:
            data = raw.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            data = raw.encode("utf-8", "replace")
        raw, used = decode_unlabelled(data)
        if used != "utf-8":  # UTF-8 in headers is legitimate (RFC 6532); anything else is not
            note = f"raw 8-bit bytes decoded as {used}"
    if "\r" in raw or "\n" in raw or "\x00" in raw:
        raw = raw.replace("\r\n", "").replace("\n", "").replace("\r", "").replace("\x00", "")
    return raw, note


def decode_header_value(raw: str, notes: list[str] | None = None, where: str = "") -> str:
    """Fully decode a raw header value: 8-bit bytes, unfolding, encoded words, control chars."""
    if raw.isascii() and "=?" not in raw and _CTRL_RE.search(raw) is None:
        return raw  # the common case: nothing to do
    text, note = raw_header_text(raw)
    if note is not None and notes is not None:
        notes.append(f"{where}{note}")
    text = decode_encoded_words(text, notes, where)
    if _CTRL_RE.search(text) is not None:
        text = _CTRL_RE.sub(" ", text)
    return clean_text(text) if not text.isascii() else text
