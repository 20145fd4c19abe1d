"""One transaction in detail: per-recipient results, too many recipients, size, SMTPUTF8, CRLF."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, Envelope, Session

from mailroom.outbound.base import RefusedError
from mailroom.outbound.smtp import SmtpTransientError, SmtpTransport
from mailroom.outbound.smtp_settings import SmtpSettings

RAW = b"From: a@x.example\r\nSubject: hi\r\nMessage-ID: <r@x.example>\r\n\r\nhello\r\n"


@dataclass
class RecipientRules:
    """An aiosmtpd handler answering RCPT per address, at most ``limit`` per transaction."""

    replies: dict[str, str] = field(default_factory=dict)  # address -> refusal
    limit: int | None = None
    transactions: list[tuple[str, ...]] = field(default_factory=list)

    async def handle_RCPT(  # noqa: N802 - aiosmtpd's hook name
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        if self.limit is not None and len(envelope.rcpt_tos) >= self.limit:
            return "452 4.5.3 Too many recipients"
        if address in self.replies:
            return self.replies[address]
        envelope.rcpt_tos.append(address)
        return "250 2.1.5 Ok"

    async def handle_DATA(  # noqa: N802 - aiosmtpd's hook name
        self, server: SMTP, session: Session, envelope: Envelope
    ) -> str:
        self.transactions.append(tuple(envelope.rcpt_tos))
        return f"250 2.0.0 Ok: queued as q{len(self.transactions)}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def serving(
    handler: RecipientRules | None = None, **smtp: Any
) -> Iterator[tuple[RecipientRules, SmtpTransport]]:
    """A server with recipient rules (``smtp``: aiosmtpd options), and a transport to it."""
    handler = handler or RecipientRules()
    controller = Controller(handler, hostname="127.0.0.1", port=_free_port(), **smtp)
    controller.start()
    config = SmtpSettings("127.0.0.1", controller.port, "none")
    transport = SmtpTransport(config, allowed_hosts=["127.0.0.1"])
    try:
        yield handler, transport
    finally:
        transport.close()
        controller.stop()


@pytest.fixture
def rules() -> Iterator[tuple[RecipientRules, SmtpTransport]]:
    """A plain server with recipient rules, and a transport to it (loopback)."""
    with serving() as served:
        yield served


def test_refused_recipients_are_listed_while_the_others_get_the_message(
    rules: tuple[RecipientRules, SmtpTransport],
) -> None:
    """One unknown recipient: the message goes to the others; the refusal has code and reply."""
    handler, transport = rules
    handler.replies["nobody@y.example"] = "550 5.1.1 No such user"
    result = transport.send(
        "a@x.example", ["b@y.example", "nobody@y.example", "c@y.example"], RAW, message_id="r"
    )
    assert result.accepted == {
        "b@y.example": "250 2.0.0 Ok: queued as q1",
        "c@y.example": "250 2.0.0 Ok: queued as q1",
    }
    assert result.refused == {"nobody@y.example": (550, "550 5.1.1 No such user")}
    assert handler.transactions == [("b@y.example", "c@y.example")]


def test_every_recipient_refused_for_good_is_a_refusal(
    rules: tuple[RecipientRules, SmtpTransport],
) -> None:
    """All 5xx: RefusedError with the code; no DATA was sent."""
    handler, transport = rules
    handler.replies = {"x@y.example": "550 5.1.1 No such user", "z@y.example": "553 5.1.3 bad"}
    with pytest.raises(RefusedError) as refused:
        transport.send("a@x.example", ["x@y.example", "z@y.example"], RAW, message_id="r")
    assert refused.value.code == 550
    assert "every recipient" in str(refused.value)
    assert handler.transactions == []


def test_a_temporary_refusal_of_every_recipient_is_transient(
    rules: tuple[RecipientRules, SmtpTransport],
) -> None:
    """One 4xx among the refusals: the message may pass later, so it is retried."""
    handler, transport = rules
    handler.replies = {"x@y.example": "550 5.1.1 No such user", "z@y.example": "450 4.2.1 busy"}
    with pytest.raises(SmtpTransientError) as deferred:
        transport.send("a@x.example", ["x@y.example", "z@y.example"], RAW, message_id="r")
    assert deferred.value.code == 450
    # The connection was reset and still carries the next message.
    handler.replies = {}
    assert transport.send("a@x.example", ["b@y.example"], RAW, message_id="r2").accepted
    assert transport.connections == 1


def test_too_many_recipients_go_in_further_transactions(
    rules: tuple[RecipientRules, SmtpTransport],
) -> None:
    """452 after two recipients: the rest follow in new transactions on the same connection."""
    handler, transport = rules
    handler.limit = 2
    recipients = [f"r{n}@y.example" for n in range(5)]
    result = transport.send("a@x.example", recipients, RAW, message_id="r")
    assert handler.transactions == [
        ("r0@y.example", "r1@y.example"),
        ("r2@y.example", "r3@y.example"),
        ("r4@y.example",),
    ]
    assert result.accepted["r0@y.example"] == "250 2.0.0 Ok: queued as q1"
    assert result.accepted["r4@y.example"] == "250 2.0.0 Ok: queued as q3"
    assert result.refused == {}
    assert transport.connections == 1


def test_recipients_are_sent_once_each_whatever_their_case(
    rules: tuple[RecipientRules, SmtpTransport],
) -> None:
    """The same address twice (in another case) is one RCPT."""
    handler, transport = rules
    transport.send("a@x.example", ["b@y.example", "B@Y.example"], RAW, message_id="r")
    assert handler.transactions == [("b@y.example",)]


def test_a_message_over_the_servers_size_limit_is_refused_before_data() -> None:
    """SIZE in EHLO: a larger message is refused at once (552), nothing is transmitted."""
    with serving(data_size_limit=200) as (handler, transport):
        with pytest.raises(RefusedError) as refused:
            transport.send("a@x.example", ["b@y.example"], RAW + b"x" * 300, message_id="r")
        assert refused.value.code == 552
        assert handler.transactions == []
        assert transport.send("a@x.example", ["b@y.example"], RAW, message_id="r2").accepted


@pytest.mark.parametrize("offered", [False, True])
def test_international_addresses_need_smtputf8(offered: bool) -> None:
    """A non-ASCII address goes with SMTPUTF8 when offered, and is refused otherwise."""
    with serving(enable_SMTPUTF8=offered) as (handler, transport):
        if not offered:
            with pytest.raises(RefusedError, match="SMTPUTF8"):
                transport.send("a@x.example", ["jürgen@y.example"], RAW, message_id="r")
            assert handler.transactions == []
            return
        result = transport.send("a@x.example", ["jürgen@y.example"], RAW, message_id="r")
    assert list(result.accepted) == ["jürgen@y.example"]
    assert handler.transactions == [("jürgen@y.example",)]


def test_bare_line_feeds_become_crlf_and_a_lone_dot_does_not_end_the_message() -> None:
    """LF-only text is sent with CRLF; a line holding only a dot is stuffed, not an end."""
    received: list[bytes] = []

    class Keep(RecipientRules):
        async def handle_DATA(  # noqa: N802 - aiosmtpd's hook name
            self, server: SMTP, session: Session, envelope: Envelope
        ) -> str:
            assert isinstance(envelope.original_content, bytes)
            received.append(envelope.original_content)
            return await super().handle_DATA(server, session, envelope)

    raw = b"Subject: dots\nMessage-ID: <d@x>\n\nbefore\n.\nafter the dot\n"
    with serving(Keep()) as (_handler, transport):
        transport.send("a@x.example", ["b@y.example"], raw, message_id="d@x")
    assert received == [
        b"Subject: dots\r\nMessage-ID: <d@x>\r\n\r\nbefore\r\n.\r\nafter the dot\r\n"
    ]
