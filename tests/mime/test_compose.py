"""mime.compose: messages written from headers and body parts read back as they were described."""

from __future__ import annotations

import email
import email.policy
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mailroom.mime import parse_message
from mailroom.mime.compose import (
    BodyPart,
    ComposeError,
    Header,
    Mailbox,
    MailboxGroup,
    compose,
)

TEXT = BodyPart("text/plain", content="Hello.")


def _lines(raw: bytes) -> list[bytes]:
    return raw.split(b"\r\n")


def test_date_message_id_and_mime_version_are_added_when_absent() -> None:
    """Date (now), Message-ID (on the domain) and MIME-Version 1.0 are generated."""
    now = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
    composed = compose([Header("Subject", "text", "Hi")], TEXT, domain="example.org", now=now)
    assert composed.message_id.endswith("@example.org")
    lines = _lines(composed.raw)
    assert b"Date: Fri, 01 Mar 2024 09:00:00 +0000" in lines
    assert f"Message-ID: <{composed.message_id}>".encode() in lines
    assert b"MIME-Version: 1.0" in lines
    assert parse_message(composed.raw).message_id == composed.message_id


def test_given_date_and_message_id_are_kept_with_their_offset() -> None:
    """A given Date keeps its offset; a given Message-ID is the message's id."""
    moment = datetime(2024, 3, 1, 9, 0, tzinfo=timezone(timedelta(hours=-5)))
    composed = compose(
        [Header("Date", "date", moment), Header("Message-ID", "messageIds", ("a1@x.example",))],
        TEXT,
        domain="example.org",
    )
    assert composed.message_id == "a1@x.example"
    assert b"Date: Fri, 01 Mar 2024 09:00:00 -0500" in _lines(composed.raw)
    assert composed.raw.count(b"Message-ID:") == 1


def test_every_line_ends_in_crlf_and_stays_short() -> None:
    """The SMTP policy: CRLF everywhere, folded header lines within 78 characters."""
    subject = " ".join(["word"] * 60)
    composed = compose([Header("Subject", "text", subject)], TEXT, domain="x")
    assert b"\n" not in composed.raw.replace(b"\r\n", b"")
    assert all(len(line) <= 78 for line in _lines(composed.raw))
    assert parse_message(composed.raw).subject == subject


def test_non_ascii_headers_are_encoded_words_and_addresses_keep_their_syntax() -> None:
    """Names and subjects become RFC 2047 words; the address list still parses the same."""
    headers = [
        Header("From", "addresses", (Mailbox("Zoë, Ämmä", "zoe@example.org"),)),
        Header(
            "To",
            "groupedAddresses",
            (
                MailboxGroup("Friends", (Mailbox(None, "a@example.org"),)),
                MailboxGroup(None, (Mailbox("Bob", "bob@example.net"),)),
            ),
        ),
        Header("Subject", "text", "Grüße — ça va?"),
    ]
    composed = compose(headers, TEXT, domain="x")
    assert composed.raw.isascii()
    parsed = parse_message(composed.raw)
    assert [(a.name, a.email) for a in parsed.from_] == [("Zoë, Ämmä", "zoe@example.org")]
    assert [a.email for a in parsed.to] == ["a@example.org", "bob@example.net"]
    assert parsed.subject == "Grüße — ça va?"
    assert b"To: Friends: a@example.org;, Bob <bob@example.net>" in _lines(composed.raw)


def test_message_ids_urls_and_raw_values_are_written_as_given() -> None:
    """messageIds get angle brackets, urls too with commas, raw values are left alone."""
    headers = [
        Header("References", "messageIds", ("a@x", "b@y")),
        Header("List-Post", "urls", ("mailto:list@example.org", "https://example.org/post")),
        Header("X-Raw", "raw", " =?utf-8?q?caf=C3=A9?= (kept)"),
    ]
    lines = _lines(compose(headers, TEXT, domain="x").raw)
    assert b"References: <a@x> <b@y>" in lines
    assert b"List-Post: <mailto:list@example.org>, <https://example.org/post>" in lines
    assert b"X-Raw: =?utf-8?q?caf=C3=A9?= (kept)" in lines


@pytest.mark.parametrize(
    ("text", "encoding", "charset"),
    [
        ("Plain short lines.\nTwo of them.", b"7bit", b"us-ascii"),
        ("Grüße aus Köln, mostly ASCII text.", b"quoted-printable", b"utf-8"),
        ("Ελληνικά κείμενα είναι όλα εκτός ASCII.", b"base64", b"utf-8"),
        ("x" * 200, b"quoted-printable", b"us-ascii"),
    ],
)
def test_text_is_encoded_by_its_content_and_read_back_exactly(
    text: str, encoding: bytes, charset: bytes
) -> None:
    """7bit for short ASCII, else the shorter of quoted-printable and base64; no newline added."""
    composed = compose([], BodyPart("text/plain", content=text), domain="x")
    assert b"Content-Transfer-Encoding: " + encoding in _lines(composed.raw)
    assert b'charset="' + charset + b'"' in composed.raw
    assert parse_message(composed.raw).text_body == text


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=300))
def test_any_text_survives_the_round_trip(text: str) -> None:
    """Whatever the text, the parsed body is exactly it (line breaks as LF)."""
    composed = compose([], BodyPart("text/plain", content=text), domain="x")
    assert parse_message(composed.raw).text_body == text


def test_attachments_inline_parts_and_file_names() -> None:
    """Bytes parts are base64 with RFC 2231 file names; cid and disposition are written."""
    body = BodyPart(
        "multipart/mixed",
        parts=(
            BodyPart(
                "multipart/related",
                parts=(
                    BodyPart("text/html", content='<img src="cid:c1@x">'),
                    BodyPart("image/png", content=b"\x89PNG", cid="c1@x", disposition="inline"),
                ),
            ),
            BodyPart("application/pdf", content=b"%PDF", name="résumé.pdf"),
        ),
    )
    composed = compose([], body, domain="x")
    assert b"filename*=utf-8''r%C3%A9sum%C3%A9.pdf" in composed.raw
    assert b"Content-ID: <c1@x>" in _lines(composed.raw)
    parsed = parse_message(composed.raw)
    names = {(a.filename, a.content_type) for a in parsed.attachments}
    assert ("résumé.pdf", "application/pdf") in names
    message = email.message_from_bytes(composed.raw, policy=email.policy.default)
    parts = {p.get_content_type(): p for p in message.walk()}
    assert parts["application/pdf"].get_content() == b"%PDF"
    assert parts["image/png"]["Content-Disposition"] == "inline"


def test_an_embedded_message_travels_unencoded_with_crlf() -> None:
    """message/rfc822 is 7bit or 8bit (RFC 2046), never base64; line ends become CRLF."""
    inner = b"Subject: inner\nFrom: a@x\n\nbody \xc3\xa9\n"
    body = BodyPart("multipart/mixed", parts=(TEXT, BodyPart("message/rfc822", content=inner)))
    composed = compose([], body, domain="x")
    assert b"Content-Transfer-Encoding: 8bit" in _lines(composed.raw)
    assert b"Subject: inner\r\nFrom: a@x\r\n\r\nbody \xc3\xa9\r\n" in composed.raw


@pytest.mark.parametrize(
    ("header", "culprit"),
    [
        (Header("Subject", "text", "two\r\nlines"), "Subject"),
        (Header("To", "addresses", (Mailbox(None, "ü@example.org"),)), "To"),
        (Header("X-Raw", "raw", "naïve"), "X-Raw"),
        (Header("X-Raw", "raw", "nul\x00byte"), "X-Raw"),
        (Header("Date", "date", datetime(2024, 1, 1)), "Date"),  # noqa: DTZ001 - naive on purpose
        (Header("References", "messageIds", ("",)), "References"),
        (Header("Cc", "addresses", (Mailbox(None, "a@b@c"),)), "Cc"),
    ],
)
def test_values_the_wire_cannot_carry_are_refused_naming_the_header(
    header: Header, culprit: str
) -> None:
    """A bare line break, a non-ASCII address or raw value, a naive date: ComposeError."""
    with pytest.raises(ComposeError) as caught:
        compose([header], TEXT, domain="x")
    assert caught.value.header == culprit


def test_idn_domains_are_written_as_punycode() -> None:
    """An internationalized domain is IDNA-encoded so the address stays ASCII."""
    composed = compose(
        [Header("To", "addresses", (Mailbox(None, "a@bücher.example"),))], TEXT, domain="x"
    )
    assert b"To: a@xn--bcher-kva.example" in _lines(composed.raw)


def test_an_unfinished_draft_address_is_written_as_typed() -> None:
    """A draft's address without a domain is kept (RFC 8621: a draft may be incomplete)."""
    composed = compose([Header("To", "addresses", (Mailbox("Bob", "bob"),))], TEXT, domain="x")
    assert b"To: Bob <bob>" in _lines(composed.raw)


def test_a_part_language_must_be_language_tags() -> None:
    """Content-Language takes RFC 5646 tags; anything else is refused, not written broken."""
    part = BodyPart("text/plain", content="x", language=("en-GB", "de"))
    assert b"Content-Language: en-GB, de" in _lines(compose([], part, domain="x").raw)
    with pytest.raises(ComposeError):
        compose([], BodyPart("text/plain", content="x", language=("\x80",)), domain="x")
