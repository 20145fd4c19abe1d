"""The envelope derived from the headers, and Bcc kept out of the transmitted bytes."""

from __future__ import annotations

import pytest

from mailroom.outbound.envelope import (
    OutboundError,
    check_envelope,
    envelope_from_headers,
    message_id_of,
    strip_bcc,
)
from tests.factories import make_message


def _emails(raw: bytes) -> tuple[str, list[str]]:
    envelope = envelope_from_headers(raw)
    return envelope["mailFrom"]["email"], [a["email"] for a in envelope["rcptTo"]]


def test_from_and_every_recipient_once() -> None:
    """MAIL FROM is the From address; To, Cc and Bcc are the recipients, once each by case."""
    raw = make_message(
        "a@x",
        to="Bob <bob@example.net>, carol@example.net",
        headers={"Cc": "BOB@Example.NET, dave@example.net", "Bcc": "eve@example.net"},
    )
    sender, recipients = _emails(raw)
    assert sender == "alice@example.org"
    assert recipients == [
        "bob@example.net",
        "carol@example.net",
        "dave@example.net",
        "eve@example.net",
    ]
    assert envelope_from_headers(raw)["rcptTo"][0]["parameters"] is None


def test_sender_wins_over_from() -> None:
    """A Sender header is the envelope's MAIL FROM (RFC 8621 section 7.5)."""
    raw = make_message("a@x", headers={"Sender": "Secretary <sec@example.org>"})
    assert _emails(raw)[0] == "sec@example.org"


def test_resent_block_decides_when_present() -> None:
    """A resent message goes to its newest Resent-* block's recipients, from its Resent-From."""
    head = (
        b"Resent-From: fwd@example.org\r\nResent-To: new@example.net\r\n"
        b"Resent-Bcc: hidden@example.net\r\nResent-Date: Fri, 1 Mar 2024 10:00:00 +0000\r\n"
        b"Resent-From: older@example.org\r\nResent-To: old@example.net\r\n"
    )
    sender, recipients = _emails(head + make_message("a@x"))
    assert sender == "fwd@example.org"
    assert recipients == ["new@example.net", "hidden@example.net"]


def test_folded_address_lines_are_read_whole() -> None:
    """A To field folded over several lines gives every address on it."""
    raw = (
        b"From: a@example.org\r\nTo: b@example.net,\r\n\tc@example.net\r\nSubject: x\r\n\r\nhi\r\n"
    )
    assert _emails(raw)[1] == ["b@example.net", "c@example.net"]


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"To: b@example.net\r\n\r\nbody", "no From"),
        (b"From: a@example.org\r\nTo: undisclosed-recipients:;\r\n\r\nbody", "no recipient"),
    ],
)
def test_no_sender_or_no_recipient_is_a_plain_error(raw: bytes, words: str) -> None:
    """A message without a sender or without recipients is refused with one sentence."""
    with pytest.raises(OutboundError, match=words):
        envelope_from_headers(raw)


def test_strip_bcc_removes_only_bcc_fields() -> None:
    """Bcc and Resent-Bcc (with their folded lines) go; every other byte stays as it was."""
    raw = (
        b"From: a@example.org\r\nBcc: x@example.net,\r\n y@example.net\r\nTo: b@example.net\r\n"
        b"resent-bcc: z@example.net\r\n\r\nBcc: in the body stays\r\n"
    )
    assert strip_bcc(raw) == (
        b"From: a@example.org\r\nTo: b@example.net\r\n\r\nBcc: in the body stays\r\n"
    )
    plain = make_message("a@x")
    assert strip_bcc(plain) is plain


def test_message_id_is_required() -> None:
    """The Message-ID is read without brackets; a message without one is refused."""
    assert message_id_of(make_message("id-1@example.org")) == "id-1@example.org"
    with pytest.raises(OutboundError, match="no Message-ID"):
        message_id_of(b"From: a@example.org\r\n\r\nbody")


def test_given_envelope_is_checked_and_deduplicated() -> None:
    """A given envelope keeps its parameters, drops repeated recipients, refuses bad shapes."""
    envelope = check_envelope(
        {
            "mailFrom": {"email": "", "parameters": {"RET": "HDRS"}},
            "rcptTo": [{"email": "b@example.net"}, {"email": "B@example.net", "parameters": None}],
        }
    )
    assert envelope == {
        "mailFrom": {"email": "", "parameters": {"RET": "HDRS"}},
        "rcptTo": [{"email": "b@example.net", "parameters": None}],
    }
    for bad in (
        [],
        {"mailFrom": {"email": "a@example.org"}, "rcptTo": []},
        {"mailFrom": {"email": "a@example.org"}, "rcptTo": [{"email": "no-at"}]},
        {"mailFrom": {"email": "a b@example.org"}, "rcptTo": [{"email": "b@example.net"}]},
    ):
        with pytest.raises(OutboundError):
            check_envelope(bad)
