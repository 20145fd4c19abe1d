"""Message-ID normalization and References / In-Reply-To parsing."""

from __future__ import annotations

import pytest

from mailroom.mime import normalize_message_id, parse_id_list


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("<abc@example.com>", "abc@example.com"),
        ("  < abc@example.com >  ", "abc@example.com"),
        ("<abc@\r\n example.com>", "abc@example.com"),
        ("abc@example.com", "abc@example.com"),
        ("<abc@example.com> (added by relay)", "abc@example.com"),
        ("<>", None),
        ("", None),
        ("   ", None),
        ("<" + "x" * 2000 + "@example.com>", None),
    ],
)
def test_normalize_message_id(value: str, expected: str | None) -> None:
    """Brackets and whitespace go, the first bracketed id wins, empty or huge ids give None."""
    assert normalize_message_id(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("<a@x> <b@x>\r\n <c@x>", ["a@x", "b@x", "c@x"]),
        ("<a@x> <b@x> <a@x>", ["a@x", "b@x"]),
        ("<a@x>,<b@x>", ["a@x", "b@x"]),
        ('Your message of "Mon, 1 Jan 2024 <not@quoted>" <a@x>', ["a@x"]),
        ("<a@x>; from joe@example.com on Mon, Jan 01, 2024", ["a@x"]),
        ("a@x b@x", ["a@x", "b@x"]),
        ("junk words only", []),
        ("<a@x> (comment <c@x>) <b@x>", ["a@x", "b@x"]),
        ("<unterminated@x", ["unterminated@x"]),
        (None, []),
        ("", []),
    ],
)
def test_parse_id_list(value: str | None, expected: list[str]) -> None:
    """Ids keep their order, lose duplicates, and junk between them is ignored."""
    assert parse_id_list(value) == expected
