"""Header decoding: RFC 2047 encoded words (good and broken), raw 8-bit bytes, unfolding."""

from __future__ import annotations

import pytest

from mailroom.mime.headers import decode_encoded_words, decode_header_value, raw_header_text


def _raw(data: bytes) -> str:
    """A header value as the compat32 parser stores it: 8-bit bytes as surrogate escapes."""
    return data.decode("ascii", "surrogateescape")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("=?utf-8?q?caf=C3=A9?=", "café"),
        ("=?UTF-8?Q?caf=C3=A9_au_lait?=", "café au lait"),
        ("=?utf-8?b?Y2Fmw6k=?=", "café"),
        ("=?iso-8859-1?q?caf=E9?= time", "café time"),
        ("Re: =?utf-8?q?caf=C3=A9?= and more", "Re: café and more"),
        # whitespace between adjacent encoded words disappears (RFC 2047 6.2)
        ("=?utf-8?q?a?=  \t =?utf-8?q?b?=", "ab"),
        # a multi-byte character split across two words survives
        ("=?utf-8?b?w6k=?= =?utf-8?q?=C3?= =?utf-8?q?=A9?=", "éé"),
        # language suffix (RFC 2231)
        ("=?utf-8*fr?q?caf=C3=A9?=", "café"),
        # broken: missing base64 padding, spaces in Q text, glued to text
        ("=?utf-8?b?Y2Fmw6k?=", "café"),
        ("=?utf-8?q?hello world?=", "hello world"),
        ("x=?utf-8?q?caf=C3=A9?=y", "xcaféy"),
        # broken: bad escape stays literal
        ("=?utf-8?q?100=ZZ?=", "100=ZZ"),
        # aliased charsets
        ("=?ks_c_5601-1987?b?vsiz58fPvLy/5A==?=", "안녕하세요"),
        ("=?gb2312?b?xOO6ww==?=", "你好"),
        # not an encoded word at all
        ("=? just text ?=", "=? just text ?="),
        ("no words here", "no words here"),
    ],
)
def test_encoded_words(value: str, expected: str) -> None:
    """Encoded words decode leniently, following RFC 2047 where it is unambiguous."""
    assert decode_encoded_words(value) == expected


def test_unknown_charset_in_encoded_word_falls_back_with_note() -> None:
    """An encoded word in an unknown charset is decoded by the fallback and noted."""
    notes: list[str] = []
    assert decode_encoded_words("=?x-martian?q?caf=C3=A9?=", notes) == "café"
    assert notes and "x-martian" in notes[0]


def test_raw_utf8_header_decodes_without_note() -> None:
    """Raw UTF-8 in a header is legitimate (RFC 6532) and is decoded silently."""
    assert raw_header_text(_raw("Grüße".encode())) == ("Grüße", None)


def test_raw_cp1252_header_falls_back_with_note() -> None:
    """Raw 8-bit bytes that are not UTF-8 are read as Windows-1252, with a note."""
    text, note = raw_header_text(_raw("“Grüße”".encode("cp1252")))
    assert text == "“Grüße”"
    assert note is not None and "windows-1252" in note


def test_raw_latin1_header_last_resort() -> None:
    """Bytes undefined in Windows-1252 end in ISO-8859-1."""
    text, note = raw_header_text(_raw(b"a\x81\xe9"))
    assert text == "a\x81é"
    assert note is not None and "iso-8859-1" in note


def test_unfolding_and_control_characters() -> None:
    """Folded values are unfolded; CR and LF become spaces, NUL is removed."""
    assert decode_header_value("first\r\n second\n\tthird") == "first second\tthird"
    assert decode_header_value("=?utf-8?q?a=0D=0Ab=00c?=") == "a  bc"
