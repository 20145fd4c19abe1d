"""Charset decoding with aliases and the documented fallback order."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mailroom.mime import decode_bytes
from mailroom.mime.charsets import clean_text, resolve_charset


@pytest.mark.parametrize(
    ("label", "data", "expected"),
    [
        ("utf-8", "Grüße".encode(), "Grüße"),
        ("UTF8", "Grüße".encode(), "Grüße"),
        ('"utf-8"', "Grüße".encode(), "Grüße"),
        ("utf-8*en", "Grüße".encode(), "Grüße"),
        ("unicode-1-1-utf-7", "Grüße".encode("utf-7"), "Grüße"),
        ("iso-8859-8-i", "שלום".encode("iso8859-8"), "שלום"),
        ("ks_c_5601-1987", "안녕하세요".encode("cp949"), "안녕하세요"),
        ("gb2312", "你好".encode("gb2312"), "你好"),
        ("gb2312", "𠀀".encode("gb18030"), "𠀀"),  # beyond GB2312: needs the GB18030 superset
        ("big5", "台灣".encode("big5"), "台灣"),
        ("shift_jis", "日本語".encode("cp932"), "日本語"),
        ("iso-2022-jp", "日本語".encode("iso2022_jp"), "日本語"),
        ("windows-1251", "Привет".encode("cp1251"), "Привет"),
        ("cp-1251", "Привет".encode("cp1251"), "Привет"),
        ("koi8-r", "Привет".encode("koi8_r"), "Привет"),
        ("iso-8859-1", "“quoted” café".encode("cp1252"), "“quoted” café"),
        ("x-user-defined", "café".encode("cp1252"), "café"),
        ("tis-620", "สวัสดี".encode("cp874"), "สวัสดี"),
        ("macintosh", "café".encode("mac_roman"), "café"),
    ],
)
def test_known_labels_and_aliases_decode_cleanly(label: str, data: bytes, expected: str) -> None:
    """Each supported label or alias decodes its own encoding without a fallback note."""
    assert decode_bytes(data, label) == (expected, None)


def test_ascii_data_needs_no_note_for_any_ascii_compatible_label() -> None:
    """Pure ASCII data decodes silently whatever ASCII-compatible charset is declared."""
    for label in (None, "us-ascii", "iso-8859-1", "gb2312", "x-unknown-thing"):
        assert decode_bytes(b"plain text", label) == ("plain text", None)


def test_us_ascii_with_utf8_bytes_is_decoded_as_utf8_with_note() -> None:
    """A us-ascii label on UTF-8 bytes falls back to UTF-8 and says so."""
    text, note = decode_bytes("naïve".encode(), "us-ascii")
    assert text == "naïve"
    assert note is not None and "utf-8" in note


def test_us_ascii_with_cp1252_bytes_falls_back_to_windows_1252() -> None:
    """A us-ascii label on bytes that are not UTF-8 falls back to Windows-1252."""
    text, note = decode_bytes("“smart” quotes".encode("cp1252"), "us-ascii")
    assert text == "“smart” quotes"
    assert note is not None and "windows-1252" in note


def test_missing_charset_with_8bit_data_follows_utf8_then_cp1252() -> None:
    """No label: UTF-8 is tried first, then Windows-1252."""
    assert decode_bytes("é".encode(), None)[0] == "é"
    assert decode_bytes("é".encode("cp1252"), None)[0] == "é"


def test_latin1_label_with_bytes_undefined_in_cp1252_uses_iso_8859_1() -> None:
    """Bytes undefined in Windows-1252 (0x81) end in ISO-8859-1, with a note."""
    text, note = decode_bytes(b"a\x81b", "iso-8859-1")
    assert text == "a\x81b"
    assert note is not None and "iso-8859-1" in note


def test_utf8_label_on_cp1252_text_is_redecoded() -> None:
    """A utf-8 label on text with no valid UTF-8 sequence at all is read as Windows-1252."""
    text, note = decode_bytes("café “x”".encode("cp1252"), "utf-8")
    assert text == "café “x”"
    assert note is not None and "windows-1252" in note


def test_utf8_with_a_few_broken_bytes_keeps_the_good_text() -> None:
    """Mostly-valid UTF-8 keeps its characters and gets U+FFFD for the broken bytes."""
    text, note = decode_bytes("Grüße ".encode() + b"\xff", "utf-8")
    assert text == "Grüße \ufffd"
    assert note is not None


def test_unknown_charset_falls_back_with_note() -> None:
    """An unknown label decodes as UTF-8 (then Windows-1252) and notes the unknown label."""
    text, note = decode_bytes("é".encode(), "x-klingon")
    assert text == "é"
    assert note is not None and "x-klingon" in note


@pytest.mark.parametrize("label", ["base64", "rot13", "hex", "unicode_escape", "idna", "a\x00b"])
def test_non_charset_codecs_are_treated_as_unknown(label: str) -> None:
    """Python codecs that are not character sets are never used to decode mail."""
    assert resolve_charset(label) is None
    text, note = decode_bytes(b"\\u0041 caf\xc3\xa9", label)
    assert text == "\\u0041 café"
    assert note is not None


def test_wrong_multibyte_charset_keeps_text_with_replacements() -> None:
    """Invalid bytes for a known multi-byte charset are replaced rather than misdecoded."""
    data = "日本語".encode("cp932") + b"\x81"
    text, note = decode_bytes(data, "shift_jis")
    assert text.startswith("日本語")
    assert note is not None


def test_output_never_contains_nul_or_lone_surrogates() -> None:
    """NUL is removed and UTF-7 lone surrogates are replaced, so text always encodes as UTF-8."""
    text, _ = decode_bytes(b"a\x00b+2AA-", "utf-7")
    assert "\x00" not in text
    text.encode("utf-8")
    assert clean_text("x\ud800y\x00") == "x?y"


@settings(max_examples=300, deadline=None, database=None)
@given(data=st.binary(max_size=200), label=st.one_of(st.none(), st.text(max_size=30)))
def test_decode_bytes_never_raises(data: bytes, label: str | None) -> None:
    """Any bytes with any label decode to UTF-8-encodable text without raising."""
    text, note = decode_bytes(data, label)
    assert "\x00" not in text
    text.encode("utf-8")
    assert note is None or isinstance(note, str)
