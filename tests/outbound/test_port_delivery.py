"""From a mail program to a real SMTP server: the port queues, the lane worker delivers."""

from __future__ import annotations

import smtplib
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from mailroom.outbound.sender import Sender
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.outbound.core_support import sending_settings
from tests.outbound.port_support import PortSetup, client, mail, port_setup, submissions
from tests.support.smtp_sink import SmtpSink


@pytest.fixture
def setup(store: Store, tmp_path: Path, sink: SmtpSink) -> Iterator[PortSetup]:
    """The started port; me's account work sends through the sink."""
    for started in port_setup(store, tmp_path):
        with store.session() as session:
            for account in session.scalars(select(Account).where(Account.name == "work")):
                smtp = {"host": sink.host, "port": sink.port, "security": "none", "login": None}
                account.settings = {**account.settings, "smtp": smtp}
        yield started


def test_smtplib_through_the_port_reaches_the_sink(
    store: Store, tmp_path: Path, setup: PortSetup, sink: SmtpSink
) -> None:
    """STARTTLS + AUTH to the port; run_lane hands it to the sink with the envelope given."""
    with client(setup) as smtp:
        smtp.sendmail(
            "me@example.org",
            ["bob@example.net", "hidden@example.com"],
            mail(extra="X-Mailroom-Kind: password_reset\r\n"),
        )
    sender = Sender(store, sending_settings(tmp_path), clock=setup.clock)
    assert sender.run_lane("calm") == 0  # it sits in the lane its kind picked
    assert sender.run_lane("urgent") == 1
    ((row, raw),) = submissions(store)
    assert row.state == "sent"
    (got,) = sink.messages
    assert got.mail_from == "me@example.org"
    assert got.rcpt_tos == ("bob@example.net", "hidden@example.com")
    assert got.data.replace(b"\r\n", b"\n") == raw.replace(b"\r\n", b"\n")
    assert f"Message-ID: <{row.message_id}>".encode() in got.data


def test_a_refused_login_on_the_port_sends_nothing(
    store: Store, tmp_path: Path, setup: PortSetup, sink: SmtpSink
) -> None:
    """Nothing reaches the sink from a client that could not sign in."""
    host, number = setup.port.address
    with smtplib.SMTP(host, number, timeout=30) as smtp:
        smtp.starttls(context=setup.trust)
        with pytest.raises(smtplib.SMTPAuthenticationError):
            smtp.login("me", "wrong")
        with pytest.raises(smtplib.SMTPSenderRefused):
            smtp.sendmail("me@example.org", ["bob@example.net"], mail())
    sender = Sender(store, sending_settings(tmp_path), clock=setup.clock)
    assert sender.run_lane("calm") == 0 and sink.messages == []
