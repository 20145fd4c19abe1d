"""Python's smtplib (STARTTLS + AUTH) sends through the submission port into the queue."""

from __future__ import annotations

import re
from collections.abc import Iterator
from email.parser import BytesParser
from email.policy import default
from pathlib import Path

import pytest
from sqlalchemy import select

from mailroom.store.engine import Store
from mailroom.store.models import Identity
from tests.outbound.port_support import PortSetup, client, mail, port_setup, submissions


@pytest.fixture
def setup(store: Store, tmp_path: Path) -> Iterator[PortSetup]:
    """The started port over me and eve."""
    yield from port_setup(store, tmp_path)


def _identity(store: Store, email: str) -> Identity:
    with store.session() as session:
        row = session.scalars(
            select(Identity).where(Identity.email == email).order_by(Identity.id)
        ).first()
        assert row is not None
        session.expunge(row)
        return row


def test_a_message_is_queued_for_the_envelope_with_id_date_and_trace_added(
    store: Store, setup: PortSetup
) -> None:
    """250 names the committed submission; the envelope is RCPT TO (a Bcc recipient too)."""
    with client(setup) as smtp:
        smtp.mail("me@example.org")
        smtp.rcpt("bob@example.net")
        smtp.rcpt("hidden@example.com")
        code, reply = smtp.data(mail())
    assert code == 250
    match = re.search(rb"submission (\d+)", reply)
    assert match is not None, reply
    ((row, raw),) = submissions(store)
    assert row.id == int(match.group(1))
    assert row.state == "queued" and row.lane == "calm" and row.kind is None
    assert row.envelope["mailFrom"]["email"] == "me@example.org"
    assert [r["email"] for r in row.envelope["rcptTo"]] == ["bob@example.net", "hidden@example.com"]
    work = _identity(store, "me@example.org")
    assert (row.account_id, row.identity_id) == (work.account_id, work.id)
    parsed = BytesParser(policy=default).parsebytes(raw)
    assert parsed["Message-ID"].endswith("@example.org>")
    assert row.message_id == parsed["Message-ID"].strip("<>")
    assert parsed["Date"].datetime.year == 2024  # the port's clock
    assert "with ESMTPSA" in parsed["Received"] and "[127.0.0.1]" in parsed["Received"]
    assert raw.endswith(b"\r\n\r\nHi Bob.\r\n")


def test_the_kind_header_picks_the_lane_and_is_removed(store: Store, setup: PortSetup) -> None:
    """X-Mailroom-Kind: password_reset goes urgent (the default kinds map); the header goes."""
    with client(setup) as smtp:
        smtp.sendmail(
            "me@example.org", ["bob@example.net"], mail(extra="X-Mailroom-Kind: password_reset\r\n")
        )
    ((row, raw),) = submissions(store)
    assert (row.lane, row.kind) == ("urgent", "password_reset")
    assert b"x-mailroom-kind" not in raw.lower()


def test_an_alias_identity_sends_and_a_given_message_id_is_kept_once(
    store: Store, setup: PortSetup
) -> None:
    """An identity of an alias may send; the same Message-ID submitted twice is one submission."""
    message = mail(
        "alias@example.org",
        extra="Message-ID: <fixed@example.org>\r\nDate: Wed, 01 May 2024 10:00:00 +0000\r\n",
    )
    replies = []
    with client(setup) as smtp:
        for _ in range(2):
            smtp.mail("alias@example.org")
            smtp.rcpt("bob@example.net")
            replies.append(smtp.data(message))
    assert replies[0] == replies[1] and replies[0][0] == 250
    ((row, raw),) = submissions(store)
    assert row.message_id == "fixed@example.org"
    assert row.identity_id == _identity(store, "alias@example.org").id
    assert raw.count(b"Message-ID:") == 1 and b"Date: Wed, 01 May 2024 10:00:00" in raw
