"""The fast FETCH reader gives exactly what IMAPClient's parser gives, or steps aside."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from imapclient.response_parser import parse_fetch_response

from mailroom.providers.imap.account import ImapConfig
from mailroom.providers.imap.connection import connect
from mailroom.providers.imap.fetchparse import parse_fetch
from mailroom.providers.imap.identity import ENVELOPE_ITEMS
from tests.imap.views import Mailbox


def _imapclient(data: list[Any]) -> dict[int, dict[bytes, Any]]:
    return {int(k): dict(v) for k, v in parse_fetch_response(data, False, True).items()}


def test_a_page_response_reads_like_imapclient() -> None:
    data: list[Any] = [
        (
            b'1 (UID 7 FLAGS (\\Seen $Label1) INTERNALDATE "17-Jul-1996 02:44:25 -0700" '
            b"RFC822.SIZE 44 BODY[HEADER.FIELDS (MESSAGE-ID)] {27}",
            b"Message-ID: <a@example>\r\n\r\n",
        ),
        (b" BODY[] {12}", b"Hello world!"),
        b")",
        b'2 (UID 9 FLAGS () INTERNALDATE " 3-Jan-2002 10:00:00 +0000" RFC822.SIZE 0 '
        b"BODY[HEADER.FIELDS (MESSAGE-ID)] NIL MODSEQ (12345))",
    ]
    fast = parse_fetch(data)
    assert fast == _imapclient(data)
    assert fast is not None
    assert fast[7][b"BODY[]"] == b"Hello world!"
    assert fast[9][b"FLAGS"] == ()
    assert fast[9][b"MODSEQ"] == (12345,)


def test_responses_without_uid_are_keyed_by_sequence_number() -> None:
    data: list[Any] = [b"3 (FLAGS (\\Flagged) RFC822.SIZE 10)"]
    assert (
        parse_fetch(data)
        == _imapclient(data)
        == {3: {b"SEQ": 3, b"FLAGS": (b"\\Flagged",), b"RFC822.SIZE": 10}}
    )


def test_shapes_it_does_not_read_are_left_to_imapclient() -> None:
    envelope: list[Any] = [b'1 (UID 2 ENVELOPE ("date" "subject" NIL NIL NIL NIL NIL NIL NIL NIL))']
    assert parse_fetch(envelope) is None
    assert parse_fetch([b"1 (UID 2 FLAGS (\\Seen)"]) is None  # unbalanced
    assert parse_fetch([(b"1 (UID 2 BODY[] {5}", b"abc")]) is None  # literal of the wrong size
    assert parse_fetch([b"1 (UID)"]) is None  # uneven item list
    assert parse_fetch([b'1 (UID 2 X "unterminated)']) is None


_ATOMS = st.sampled_from(
    [b"\\Seen", b"\\Answered", b"$Forwarded", b"NIL", b"0", b"0123", b"42", b"Junk", b"\\*"]
)


@st.composite
def _value(draw: st.DrawFn, depth: int = 0) -> tuple[bytes, bytes | None]:
    """(text, literal) of one value; a literal ends the text with {n}."""
    kind = draw(
        st.sampled_from(["atom", "quoted", "list", "literal"] if depth < 2 else ["atom", "quoted"])
    )
    if kind == "atom":
        return draw(_ATOMS), None
    if kind == "quoted":
        body = draw(
            st.text(
                st.characters(min_codepoint=32, max_codepoint=126, exclude_characters='"\\'),
                max_size=20,
            )
        )
        return b'"' + body.encode() + b'"', None
    if kind == "literal":
        body = draw(st.binary(max_size=40))
        return b"{%d}" % len(body), body
    items = draw(st.lists(_value(depth + 1).filter(lambda v: v[1] is None), max_size=3))
    return b"(" + b" ".join(text for text, _ in items) + b")", None


@st.composite
def _response(draw: st.DrawFn) -> list[Any]:
    data: list[Any] = []
    uids = draw(st.lists(st.integers(1, 10**6), min_size=1, max_size=4, unique=True))
    for sequence, uid in enumerate(uids, 1):
        names = draw(
            st.lists(
                st.sampled_from([b"FLAGS", b"X-ITEM", b"BODY[]", b"BODY[HEADER]", b"RFC822.SIZE"]),
                unique=True,
                max_size=4,
            )
        )
        text = b"%d (UID %d" % (sequence, uid)
        for name in names:
            value, literal = draw(_value())
            text += b" " + name + b" " + value
            if literal is not None:
                data.append((text, literal))
                text = b""
        data.append(text + b")")
    return data


@settings(max_examples=300, deadline=None)
@given(_response())
def test_generated_responses_read_like_imapclient(data: list[Any]) -> None:
    assert parse_fetch(data) == _imapclient(data)


def test_real_dovecot_responses_read_like_imapclient(mailbox: Mailbox) -> None:
    for number in range(5):
        mailbox.append(
            "INBOX",
            b"Message-ID: <m%d@example>\r\nSubject: s%d\r\n\r\nbody %d\r\n"
            % (number, number, number),
            (b"\\Seen",) if number % 2 else (),
        )
    config = ImapConfig(mailbox.server.host, mailbox.server.port, "none", mailbox.user)
    conn = connect(config, mailbox.password, allowed_hosts=[mailbox.server.host])
    try:
        conn.select("INBOX")
        imap = conn.imap
        for items in (ENVELOPE_ITEMS, (*ENVELOPE_ITEMS, "BODY.PEEK[]"), ("UID", "RFC822.SIZE")):
            tag = imap._command("UID", "FETCH", "1:*", "(" + " ".join(items) + ")")
            typ, data = imap._command_complete("FETCH", tag)
            typ, data = imap._untagged_response(typ, data, "FETCH")
            fast = parse_fetch(data)
            assert fast is not None
            assert fast == _imapclient(data)
            assert len(fast) == 5
            assert conn.fetch("1:*", items) == fast  # what the connection hands out
    finally:
        conn.close()


def test_an_envelope_survives_pickling() -> None:
    """Envelopes pickle as plain tuples and come back equal, with or without Gmail's facts."""
    import pickle
    from datetime import UTC, datetime

    from mailroom.providers.imap.fetcher import Envelope
    from mailroom.providers.imap.gmail_ext import GmailFacts

    plain = Envelope(7, 1234, "<a@b>", frozenset({"\\Seen"}), datetime(2026, 1, 2, tzinfo=UTC))
    gmail = Envelope(8, 99, None, frozenset(), None, GmailFacts(1, 2, ("\\Inbox",)))
    assert pickle.loads(pickle.dumps([plain, gmail])) == [plain, gmail]
