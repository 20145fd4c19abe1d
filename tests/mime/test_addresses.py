"""Address-list parsing, tolerant of the junk real mail carries."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mailroom.mime import Address, parse_address_list


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Joe <joe@Example.COM>", [("Joe", "joe@example.com")]),
        ("JOE@EXAMPLE.COM", [("", "JOE@example.com")]),
        ("<joe@example.com>", [("", "joe@example.com")]),
        ('"Doe, John" <john@example.com>', [("Doe, John", "john@example.com")]),
        ("a@x.org, B <b@x.org>", [("", "a@x.org"), ("B", "b@x.org")]),
        ("joe@example.com (Joe Bloggs)", [("Joe Bloggs", "joe@example.com")]),
        ("Joe Bloggs joe@example.com", [("Joe Bloggs", "joe@example.com")]),
        ("a@x.org b@x.org", [("", "a@x.org"), ("", "b@x.org")]),
        ("=?utf-8?q?J=C3=B6rg?= <j@x.de>", [("Jörg", "j@x.de")]),
        ('"=?utf-8?q?J=C3=B6rg?=" <j@x.de>', [("Jörg", "j@x.de")]),
        # an encoded comma must not split the address
        ("=?utf-8?q?Doe=2C_John?= <j@x.org>", [("Doe, John", "j@x.org")]),
        ("Team: a@x.org, b@x.org;, c@x.org", [("", "a@x.org"), ("", "b@x.org"), ("", "c@x.org")]),
        ("undisclosed-recipients:;", []),
        ('"" <>', []),
        ("", []),
        ("mailto:joe@example.com", [("", "joe@example.com")]),
        ("Joe <joe@example.com", [("Joe", "joe@example.com")]),
        ('"unterminated <joe@example.com>', [("unterminated", "joe@example.com")]),
        ("<@relay.example,@r2.example:joe@example.com>", [("", "joe@example.com")]),
        ('"joe smith"@example.com', [("", '"joe smith"@example.com')]),
        ("MAILER-DAEMON", [("", "MAILER-DAEMON")]),
        ("Joe <joe @ example.com>", [("Joe", "joe@example.com")]),
    ],
)
def test_address_lists(value: str, expected: list[tuple[str, str]]) -> None:
    """Addresses are split, unquoted, decoded and normalized (domain lower-cased)."""
    assert parse_address_list(value) == [Address(name, email) for name, email in expected]


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(alphabet=st.sampled_from(list('ab@.,;:<>()"\\ =?qQ_\t\r\né')), max_size=60))
def test_address_parsing_never_raises_and_never_yields_empty_emails(value: str) -> None:
    """Junk parses without raising; emails are never empty and only quoted parts hold spaces."""
    for address in parse_address_list(value):
        assert address.email
        unquoted = re.sub(r'^"(?:[^"\\]|\\.)*"', "", address.email)
        assert not any(ch.isspace() for ch in unquoted)
