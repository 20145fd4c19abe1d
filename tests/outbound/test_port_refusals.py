"""What the submission port refuses: someone else's address, no sign-in, too large, malformed."""

from __future__ import annotations

import smtplib
from collections.abc import Iterator
from pathlib import Path

import pytest

from mailroom.outbound.submission_port import MAX_RECIPIENTS
from mailroom.store.engine import Store
from tests.outbound.port_support import PortSetup, client, mail, port_setup, submissions


@pytest.fixture
def setup(store: Store, tmp_path: Path) -> Iterator[PortSetup]:
    """The started port over me and eve."""
    yield from port_setup(store, tmp_path)


def _data(setup: PortSetup, sender: str, message: bytes) -> tuple[int, bytes]:
    with client(setup) as smtp:
        code, reply = smtp.mail(sender)
        assert code == 250, reply
        smtp.rcpt("bob@example.net")
        return smtp.data(message)


def test_sending_as_someone_elses_address_is_refused_in_the_envelope_and_the_headers(
    store: Store, setup: PortSetup
) -> None:
    """MAIL FROM, From or Sender naming eve's address while signed in as me: 550 5.7.1."""
    with client(setup) as smtp:
        code, reply = smtp.mail("eve@example.org")
    assert code == 550 and reply.startswith(b"5.7.1 eve@example.org is not one of your addresses")
    for message in (
        mail("Eve <eve@example.org>"),
        mail(extra="Sender: eve@example.org\r\n"),
        mail("me@example.org, eve@example.org"),
    ):
        code, reply = _data(setup, "me@example.org", message)
        assert code == 550 and b"eve@example.org is not one of your addresses" in reply
    with client(setup, "eve") as smtp:  # eve may not send as me either
        assert smtp.mail("me@example.org")[0] == 550
        smtp.rset()
        assert smtp.mail("eve@example.org")[0] == 250
    assert submissions(store) == []


def test_nothing_is_taken_before_sign_in(store: Store, setup: PortSetup) -> None:
    """MAIL without AUTH is 530 with a sentence saying to sign in."""
    host, number = setup.port.address
    with smtplib.SMTP(host, number, timeout=30) as smtp:
        smtp.starttls(context=setup.trust)
        smtp.ehlo()
        code, reply = smtp.mail("me@example.org")
    assert code == 530 and b"Sign in first" in reply
    assert submissions(store) == []


def test_an_oversize_message_is_refused_whether_announced_or_not(
    store: Store, setup: PortSetup
) -> None:
    """SIZE above the limit is 552 at MAIL; a larger DATA is 552 after it; nothing is queued."""
    big = mail(body=("y" * 70 + "\r\n") * 3000)  # 216 kB
    with client(setup) as smtp:
        assert b"SIZE 200000" in (smtp.ehlo_resp or b"")
        code, _ = smtp.mail("me@example.org", ["SIZE=300000"])
        assert code == 552
        smtp.rset()
        smtp.mail("me@example.org")
        smtp.rcpt("bob@example.net")
        code, _ = smtp.data(big)
        assert code == 552
        assert smtp.noop()[0] == 250  # the connection is still good
    assert submissions(store) == []


def test_malformed_messages_and_recipients_get_one_sentence_each(
    store: Store, setup: PortSetup
) -> None:
    """No From, a bad kind, a recipient without a domain, too many recipients."""
    no_from = b"To: bob@example.net\r\nSubject: x\r\n\r\nbody\r\n"
    code, reply = _data(setup, "me@example.org", no_from)
    assert code == 554 and b"no From address" in reply
    code, reply = _data(setup, "me@example.org", mail(extra="X-Mailroom-Kind: no way\r\n"))
    assert code == 554 and b"is not a kind of mail" in reply
    with client(setup) as smtp:
        smtp.mail("me@example.org")
        code, reply = smtp.rcpt("bob")
        assert code == 553 and b"not an email address" in reply
        for number in range(MAX_RECIPIENTS):
            assert smtp.rcpt(f"r{number}@example.net")[0] == 250
        code, reply = smtp.rcpt("one-too-many@example.net")
        assert code == 452
    assert submissions(store) == []
