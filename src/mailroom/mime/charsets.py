"""Turning bytes of unknown or mislabelled character sets into text, without ever raising.

Mail declares its character set in ``Content-Type: ...; charset=...`` and in RFC 2047 encoded
words, and both are wrong often enough: labels nobody's codec knows (``x-user-defined``,
``iso-8859-8-i``, ``ks_c_5601-1987``), ``us-ascii`` on text full of 8-bit bytes, ``utf-8`` on
Windows-1252 text, raw 8-bit header bytes with no label at all.

Label resolution (:func:`resolve_charset`):
    The label is lower-cased and stripped of quotes, whitespace and an RFC 2231 ``*language``
    suffix, then looked up in ``_ALIASES`` (WHATWG-style supersets: ``gb2312``/``gbk`` ->
    ``gb18030``, ``ks_c_5601-1987``/``euc-kr`` -> ``cp949``, ``shift_jis`` -> ``cp932``,
    ``big5`` -> ``big5hkscs``, ``iso-8859-8-i`` -> ``iso8859-8``, ``unicode-1-1-utf-7`` ->
    ``utf-7``, ``x-user-defined`` -> ``cp1252``, ``windows-125x``/``cp-125x`` -> ``cp125x``,
    ...), and otherwise in Python's codec registry. Only real text codecs are accepted:
    ``unicode_escape``, ``raw_unicode_escape``, ``idna``, ``punycode``, ``undefined`` and the
    bytes-to-bytes codecs (``base64``, ``rot13``, ...) count as unknown.

Fallback order (:func:`decode_bytes`), the documented contract:
    1. No label, or a US-ASCII label (``us-ascii``, ``ascii``, ``ansi_x3.4-1968``, ``7bit``...):
       ASCII; if the data has 8-bit bytes: UTF-8 (strict), then Windows-1252 (strict), then
       ISO-8859-1 (which cannot fail).
    2. An ISO-8859-1 / Windows-1252 label: Windows-1252 (strict, as browsers do), then
       ISO-8859-1.
    3. A UTF-8 label: UTF-8 (strict); if that fails and the data holds no valid UTF-8 multi-byte
       sequence at all, it is really single-byte text: Windows-1252, then ISO-8859-1; otherwise
       UTF-8 with U+FFFD for the broken bytes.
    4. Any other known label: that codec (strict), then UTF-8 (strict), then that codec with
       U+FFFD replacement characters.
    5. An unknown label: UTF-8 (strict), then Windows-1252 (strict), then ISO-8859-1.

    Raw 8-bit header bytes (no label) follow rule 1: UTF-8, then Windows-1252, then ISO-8859-1.
    Every step past the first one yields a plain-English note. Pure ASCII data is decoded as
    ASCII without a note under any label except stateful or non-ASCII-based codecs (UTF-7,
    UTF-16/32, ISO-2022-*, HZ, EBCDIC), which always go through their codec.

Invariants:
    * :func:`decode_bytes` never raises, for any ``bytes`` and any label.
    * The returned text never contains U+0000 or lone surrogates, so it always encodes to
      UTF-8 and can be stored in PostgreSQL ``text`` columns.
"""

from __future__ import annotations

import codecs
import re
from functools import lru_cache

__all__ = ["clean_text", "decode_bytes", "decode_unlabelled", "resolve_charset"]

# fmt: off
# Labels whose first choice is "plain ASCII, but 8-bit data means someone lied".
_ASCII_LABELS = frozenset(
    {
        "us-ascii", "ascii", "us", "ansi_x3.4-1968", "ansi_x3.4-1986", "iso646-us", "iso-646-us",
        "iso_646.irv:1991", "iso-ir-6", "csascii", "cp367", "ibm367", "ascii-us", "7bit", "8bit",
        "default", "us_ascii", "usascii",
    }
)

# Labels treated as Windows-1252 with ISO-8859-1 as the never-failing fallback.
_LATIN1_LABELS = frozenset(
    {
        "iso-8859-1", "iso8859-1", "iso_8859-1", "iso88591", "iso_8859-1:1987", "iso-ir-100",
        "latin1", "latin-1", "l1", "cp819", "ibm819", "csisolatin1", "windows-1252", "cp1252",
        "x-cp1252", "win-1252", "cp-1252", "windows1252", "iso-8859-1-i", "8859-1", "iso8859_1",
        "iso_8859_1", "x-user-defined", "ansi", "ansi-1252",
    }
)

_UTF8_LABELS = frozenset(
    {
        "utf-8", "utf8", "unicode-1-1-utf-8", "unicode-2-0-utf-8", "x-unicode20utf8",
        "x-unicode-2-0-utf-8", "utf_8", "utf-8-sig", "csutf8",
    }
)

# Explicit label -> Python codec name, for labels Python does not know or knows too narrowly.
_ALIASES: dict[str, str] = {
    # Chinese: GB2312 and GBK are subsets of GB18030; Big5 is decoded as Big5-HKSCS.
    "gb2312": "gb18030", "gb_2312": "gb18030", "gb_2312-80": "gb18030", "gbk": "gb18030",
    "x-gbk": "gb18030", "cp936": "gb18030", "ms936": "gb18030", "windows-936": "gb18030",
    "euc-cn": "gb18030", "x-euc-cn": "gb18030", "csgb2312": "gb18030", "chinese": "gb18030",
    "iso-ir-58": "gb18030", "csiso58gb231280": "gb18030", "gb18030": "gb18030",
    "gb2312_charset": "gb18030", "x-gb2312": "gb18030", "chinesebig5": "big5hkscs",
    "big5": "big5hkscs", "big-5": "big5hkscs", "x-x-big5": "big5hkscs", "csbig5": "big5hkscs",
    "cn-big5": "big5hkscs", "big5-hkscs": "big5hkscs", "cp950": "big5hkscs",
    # Korean: KS C 5601 / EUC-KR are subsets of CP949 (Unified Hangul Code).
    "ks_c_5601-1987": "cp949", "ks_c_5601-1989": "cp949", "ks_c_5601": "cp949",
    "ksc5601": "cp949", "ksc_5601": "cp949", "euc-kr": "cp949", "euckr": "cp949",
    "korean": "cp949", "csksc56011987": "cp949", "iso-ir-149": "cp949", "windows-949": "cp949",
    "cseuckr": "cp949", "x-windows-949": "cp949",
    # Japanese: Shift_JIS as Microsoft's superset.
    "shift_jis": "cp932", "shift-jis": "cp932", "sjis": "cp932", "x-sjis": "cp932",
    "ms_kanji": "cp932", "windows-31j": "cp932", "csshiftjis": "cp932", "x-ms-cp932": "cp932",
    "csiso2022jp": "iso2022_jp", "iso-2022-jp": "iso2022_jp_ext", "x-euc-jp": "euc_jp",
    # Hebrew / Arabic logical and visual ordering variants: same bytes.
    "iso-8859-8-i": "iso8859-8", "iso-8859-8-e": "iso8859-8", "iso_8859-8-i": "iso8859-8",
    "csiso88598i": "iso8859-8", "csiso88598e": "iso8859-8", "logical": "iso8859-8",
    "visual": "iso8859-8", "iso-8859-6-i": "iso8859-6", "iso-8859-6-e": "iso8859-6",
    "csiso88596i": "iso8859-6", "csiso88596e": "iso8859-6",
    # UTF-7 under its old names.
    "unicode-1-1-utf-7": "utf-7", "csunicode11utf7": "utf-7", "x-utf-7": "utf-7",
    # Thai and Turkish, as browsers do.
    "tis-620": "cp874", "iso-8859-11": "cp874", "windows-874": "cp874", "x-windows-874": "cp874",
    "iso-8859-9": "cp1254", "latin5": "cp1254",
    # Mac and misc.
    "x-mac-roman": "mac_roman", "macintosh": "mac_roman", "mac": "mac_roman",
    "x-mac-cyrillic": "mac_cyrillic", "x-mac-ce": "mac_latin2",
    "koi8": "koi8_r", "koi": "koi8_r", "cskoi8r": "koi8_r",
}

# Codecs that Python registers as text encodings but that are not character sets.
_REJECTED_CODECS = frozenset(
    {"unicode-escape", "raw-unicode-escape", "idna", "punycode", "undefined", "mbcs", "oem"}
)
# fmt: on

_WINDOWS_RE = re.compile(r"^(?:x-)?(?:windows|win|cp|ms)[-_ ]?(125[0-8]|874|9[3-5][0-9])$")
_LANG_SUFFIX_RE = re.compile(r"\*.*$")
_MAX_LABEL = 64
_ASCII_PROBE = bytes(range(128))
_ASCII_PROBE_TEXT = _ASCII_PROBE.decode("ascii")

KIND_ASCII = "ascii"
KIND_LATIN1 = "latin1"
KIND_UTF8 = "utf8"
KIND_OTHER = "other"
KIND_UNKNOWN = "unknown"


def _normalize_label(label: str) -> str:
    label = label.strip().strip("\"'").strip().lower()
    return _LANG_SUFFIX_RE.sub("", label).strip()


@lru_cache(maxsize=1024)
def _classify(label: str) -> tuple[str, str | None, bool]:
    """Return (kind, python codec name or None, ASCII data may be decoded as ASCII) for a label.

    Unknown labels count as ASCII-compatible: their fallback (UTF-8) reads ASCII as ASCII.
    """
    norm = _normalize_label(label)
    if not norm or norm in _ASCII_LABELS:
        return KIND_ASCII, "ascii", True
    if norm in _LATIN1_LABELS:
        return KIND_LATIN1, "cp1252", True
    if norm in _UTF8_LABELS:
        return KIND_UTF8, "utf-8", True
    if len(norm) > _MAX_LABEL:
        return KIND_UNKNOWN, None, True
    codec_name = _ALIASES.get(norm)
    if codec_name is None:
        m = _WINDOWS_RE.match(norm)
        if m is not None:
            codec_name = "cp" + m.group(1)
            if codec_name == "cp1252":
                return KIND_LATIN1, "cp1252", True
    try:
        info = codecs.lookup(codec_name or norm)
    except Exception:  # LookupError, ValueError on NUL, anything odd
        return KIND_UNKNOWN, None, True
    if not getattr(info, "_is_text_encoding", True) or info.name in _REJECTED_CODECS:
        return KIND_UNKNOWN, None, True
    if info.name == "utf-8":
        return KIND_UTF8, "utf-8", True
    if info.name in ("ascii",):
        return KIND_ASCII, "ascii", True
    if info.name in ("iso8859-1", "latin-1", "cp1252"):
        return KIND_LATIN1, "cp1252", True
    try:
        # stateful 7-bit codecs (ISO-2022-*, HZ) give ASCII bytes another meaning
        stateful = "2022" in info.name or info.name.startswith("hz")
        ascii_ok = not stateful and _ASCII_PROBE.decode(info.name) == _ASCII_PROBE_TEXT
    except Exception:
        ascii_ok = False
    return KIND_OTHER, info.name, ascii_ok


def resolve_charset(label: str | None) -> str | None:
    """Return the Python codec name used for a MIME charset label, or None if it is unknown.

    ``None`` and empty labels resolve to ``"ascii"``; ISO-8859-1 labels resolve to ``"cp1252"``.
    """
    if label is None:
        return "ascii"
    return _classify(label)[1]


def clean_text(text: str) -> str:
    """Remove U+0000 and replace lone surrogates so that ``text`` encodes as UTF-8."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def _single_byte(data: bytes) -> tuple[str, str]:
    """Windows-1252, then ISO-8859-1; returns (text, codec used)."""
    try:
        return data.decode("cp1252"), "windows-1252"
    except UnicodeDecodeError:
        return data.decode("latin-1"), "iso-8859-1"


def _utf8_or_single_byte(data: bytes) -> tuple[str, str]:
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return _single_byte(data)


def decode_unlabelled(data: bytes) -> tuple[str, str]:
    """Decode 8-bit bytes that carry no charset label (e.g. raw header bytes), never raising.

    Tries UTF-8, then Windows-1252, then ISO-8859-1; returns ``(text, codec used)`` where the
    codec is ``"utf-8"``, ``"windows-1252"`` or ``"iso-8859-1"``. U+0000 is removed.
    """
    text, used = _utf8_or_single_byte(data)
    return text.replace("\x00", ""), used


def _has_utf8_multibyte(text_with_replacements: str) -> bool:
    """True if any non-ASCII character other than U+FFFD survived a lenient UTF-8 decode."""
    return not text_with_replacements.replace("\ufffd", "").isascii()


def decode_bytes(data: bytes, charset: str | None) -> tuple[str, str | None]:
    """Decode ``data`` declared as ``charset``; return ``(text, note)``, never raising.

    ``note`` is ``None`` when the declared charset (or plain ASCII for no label) decoded the
    data cleanly, otherwise a plain-English description of the fallback that was used. See the
    module docstring for the full fallback order.
    """
    try:
        return _decode_bytes(data if type(data) is bytes else bytes(data), charset)
    except Exception as exc:  # pragma: no cover - defensive: the steps above cannot raise
        return clean_text(bytes(data).decode("latin-1")), f"charset: decoding failed ({exc!r})"


def _decode_bytes(data: bytes, charset: str | None) -> tuple[str, str | None]:
    label = "" if charset is None else charset
    kind, codec, ascii_ok = _classify(label)
    if ascii_ok and data.isascii():
        return data.decode("ascii").replace("\x00", ""), None
    shown = _normalize_label(label)[:_MAX_LABEL]
    if kind == KIND_ASCII:
        text, used = _utf8_or_single_byte(data)
        what = f"charset {shown!r}" if shown else "no charset"
        return text.replace("\x00", ""), f"8-bit data with {what}, decoded as {used}"
    if kind == KIND_LATIN1:
        text, used = _single_byte(data)
        if used == "windows-1252":
            return text.replace("\x00", ""), None
        note = f"charset {shown!r}: bytes undefined in windows-1252, decoded as iso-8859-1"
        return text.replace("\x00", ""), note
    if kind == KIND_UTF8:
        try:
            return data.decode("utf-8").replace("\x00", ""), None
        except UnicodeDecodeError:
            lenient = data.decode("utf-8", "replace")
            if _has_utf8_multibyte(lenient):
                return clean_text(lenient), f"charset {shown!r}: invalid UTF-8 bytes replaced"
            text, used = _single_byte(data)
            note = f"charset {shown!r}: not valid UTF-8, decoded as {used}"
            return text.replace("\x00", ""), note
    if kind == KIND_OTHER and codec is not None:
        try:
            return clean_text(data.decode(codec)), None
        except Exception:
            pass
        try:
            return data.decode("utf-8").replace("\x00", ""), (
                f"charset {shown!r}: invalid for that charset, decoded as utf-8"
            )
        except UnicodeDecodeError:
            pass
        try:
            return clean_text(data.decode(codec, "replace")), (
                f"charset {shown!r}: invalid bytes replaced"
            )
        except Exception:
            text, used = _single_byte(data)
            return text.replace("\x00", ""), f"charset {shown!r}: codec failed, decoded as {used}"
    text, used = _utf8_or_single_byte(data)
    return text.replace("\x00", ""), f"unknown charset {shown!r}, decoded as {used}"
