"""The SMTP transport against a real aiosmtpd sink: TLS, AUTH, replies, reuse, the SSRF guard."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from mailroom.errors import ConfigError
from mailroom.outbound.base import (
    AuthError,
    RefusedError,
    SendResult,
    TransientError,
    Transport,
)
from mailroom.outbound.smtp import SmtpRateLimitError, SmtpTransientError, SmtpTransport
from mailroom.outbound.smtp_settings import SmtpSettings
from mailroom.providers.netguard import BlockedHostError, unreachable
from tests.jmap.conftest import self_signed
from tests.support.smtp_sink import SmtpSink
from tests.support.tcpproxy import FaultyProxy

LOOPBACK = ("127.0.0.1",)  # the operator's allow-list: the sink listens on loopback


def message(number: int = 1) -> bytes:
    """A small message with its own Message-ID."""
    return (
        f"From: a@x.example\r\nTo: b@y.example\r\nSubject: n{number}\r\n"
        f"Message-ID: <{number}@x.example>\r\n\r\nbody {number}\r\n"
    ).encode()


def send(transport: SmtpTransport, number: int = 1) -> SendResult:
    """Send message ``number`` from a@x.example to b@y.example."""
    return transport.send(
        "a@x.example", ["b@y.example"], message(number), message_id=f"{number}@x.example"
    )


@pytest.fixture
def cert(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    return self_signed(tmp_path)


@pytest.fixture
def trust(cert: tuple[Path, Path]) -> ssl.SSLContext:
    """A client context that trusts the test certificate (instead of the system store)."""
    return ssl.create_default_context(cafile=str(cert[0]))


@pytest.fixture
def plain_sink() -> Iterator[SmtpSink]:
    """A sink without TLS or AUTH."""
    with SmtpSink() as sink:
        yield sink


def plain(sink: SmtpSink) -> SmtpTransport:
    """A transport to the plain sink (unencrypted: loopback only)."""
    return SmtpTransport(SmtpSettings(sink.host, sink.port, "none"), allowed_hosts=LOOPBACK)


@pytest.mark.parametrize("security", ["starttls", "tls"])
def test_tls_and_auth_deliver_with_the_servers_reply_per_recipient(
    cert: tuple[Path, Path], trust: ssl.SSLContext, security: str
) -> None:
    """STARTTLS or implicit TLS, AUTH with the account's login; each recipient gets the reply."""
    sink = SmtpSink(
        login="alice",
        password="pw",
        certfile=cert[0],
        keyfile=cert[1],
        implicit_tls=security == "tls",
    )
    with sink:
        config = SmtpSettings(sink.host, sink.port, security, "alice")
        with SmtpTransport(config, "pw", allowed_hosts=LOOPBACK, ssl_context=trust) as transport:
            assert isinstance(transport, Transport)
            result = transport.send(
                "a@x.example", ["b@y.example", "c@y.example"], message(), message_id="1@x.example"
            )
    assert result.message_id == "1@x.example"
    assert result.accepted == {
        "b@y.example": "250 2.0.0 Ok: queued",
        "c@y.example": "250 2.0.0 Ok: queued",
    }
    assert result.refused == {}
    [received] = sink.messages
    assert received.login == "alice"
    assert received.rcpt_tos == ("b@y.example", "c@y.example")
    assert b"Message-ID: <1@x.example>" in received.data


def test_a_wrong_password_is_an_auth_error_in_one_sentence(
    cert: tuple[Path, Path], trust: ssl.SSLContext
) -> None:
    """535 from the server: AuthError naming the login, nothing delivered."""
    with SmtpSink(login="alice", password="pw", certfile=cert[0], keyfile=cert[1]) as sink:
        config = SmtpSettings(sink.host, sink.port, "starttls", "alice")
        transport = SmtpTransport(config, "wrong", allowed_hosts=LOOPBACK, ssl_context=trust)
        with transport, pytest.raises(AuthError) as refused:
            send(transport)
    text = str(refused.value)
    assert text == (
        "The server 127.0.0.1 refused the login for 'alice'; check the SMTP user name and password."
    )
    assert "\n" not in text and sink.messages == []


def test_an_untrusted_certificate_is_refused_clearly(cert: tuple[Path, Path]) -> None:
    """The system store does not know the self-signed certificate: AuthError, no mail."""
    with SmtpSink(certfile=cert[0], keyfile=cert[1], implicit_tls=True) as sink:
        config = SmtpSettings(sink.host, sink.port, "tls")
        transport = SmtpTransport(config, allowed_hosts=LOOPBACK)
        with transport, pytest.raises(AuthError) as refused:
            send(transport)
    assert str(refused.value).startswith(
        "The server 127.0.0.1 presented a certificate that is not trusted for it ("
    )
    assert refused.value.reason is not None and "not trusted" in refused.value.reason
    assert sink.messages == []


def test_starttls_not_offered_stops_before_anything_is_sent(plain_sink: SmtpSink) -> None:
    """A server without STARTTLS: the transport refuses to go on in the clear."""
    config = SmtpSettings(plain_sink.host, plain_sink.port, "starttls")
    transport = SmtpTransport(config, allowed_hosts=LOOPBACK)
    with transport, pytest.raises(AuthError, match="does not offer STARTTLS"):
        send(transport)
    assert plain_sink.attempts == 0


def test_550_is_refused_for_good_with_code_and_reply(plain_sink: SmtpSink) -> None:
    """A 5xx to DATA: RefusedError carrying the server's code and reply."""
    plain_sink.script(["550 5.7.1 message content rejected"])
    with plain(plain_sink) as transport, pytest.raises(RefusedError) as refused:
        send(transport)
    assert refused.value.code == 550
    assert refused.value.reply == "550 5.7.1 message content rejected"
    assert str(refused.value) == (
        "The server 127.0.0.1 refused the message (550 5.7.1 message content rejected)."
    )


def test_451_is_transient_and_the_connection_stays_usable(plain_sink: SmtpSink) -> None:
    """A 4xx to DATA is a TransientError; the next send on the same connection succeeds."""
    plain_sink.script(["451 4.3.0 try again later"])
    with plain(plain_sink) as transport:
        with pytest.raises(SmtpTransientError) as deferred:
            send(transport, 1)
        send(transport, 2)
        assert transport.connections == 1
    assert not isinstance(deferred.value, SmtpRateLimitError)
    assert deferred.value.code == 451
    assert len(plain_sink.messages) == 1


def test_a_421_saying_too_many_is_a_rate_limit(plain_sink: SmtpSink) -> None:
    """The server asks to slow down: RateLimitError (a TransientError) with the code."""
    plain_sink.script(["421 4.7.0 Too many messages, slow down"])
    with plain(plain_sink) as transport, pytest.raises(SmtpRateLimitError) as slowed:
        send(transport)
    assert isinstance(slowed.value, TransientError)
    assert slowed.value.code == 421


def test_one_connection_carries_several_messages(plain_sink: SmtpSink) -> None:
    """Three sends, one connection (RSET between them)."""
    with plain(plain_sink) as transport:
        for number in (1, 2, 3):
            transport.send(
                "a@x.example", ["b@y.example"], message(number), message_id=f"{number}@x"
            )
        assert transport.connections == 1
    assert [m.data.count(b"Subject: n") for m in plain_sink.messages] == [1, 1, 1]


def test_a_connection_closed_by_the_server_is_opened_again(plain_sink: SmtpSink) -> None:
    """The connection is cut between two sends: the next send connects again and delivers."""
    with FaultyProxy(plain_sink.host, plain_sink.port) as proxy:
        config = SmtpSettings(proxy.host, proxy.port, "none")
        with SmtpTransport(config, allowed_hosts=LOOPBACK) as transport:
            send(transport, 1)
            proxy.drop_all()
            send(transport, 2)
            assert transport.connections == 2
    assert len(plain_sink.messages) == 2


def test_the_ssrf_guard_refuses_a_private_address_not_allowed(plain_sink: SmtpSink) -> None:
    """Loopback without the operator's allow-list: blocked before any connection."""
    config = SmtpSettings(plain_sink.host, plain_sink.port, "none")
    with SmtpTransport(config) as transport, pytest.raises(BlockedHostError):
        send(transport)
    assert plain_sink.attempts == 0


def test_a_login_without_password_is_a_config_error() -> None:
    """A login needs a password to log in with."""
    with pytest.raises(ConfigError):
        SmtpTransport(SmtpSettings("127.0.0.1", 25, "none", "alice"))


@pytest.mark.parametrize("host", ["10.1.2.3", "192.168.0.10", "169.254.169.254"])
def test_private_addresses_are_blocked_without_connecting(host: str) -> None:
    """An intranet or metadata address that the operator did not allow: blocked up front."""
    transport = SmtpTransport(SmtpSettings(host, 587, "starttls"), allowed_hosts=LOOPBACK)
    with transport, pytest.raises(BlockedHostError) as blocked:
        send(transport)
    assert str(blocked.value) == unreachable(host)
    assert transport.connections == 0


def test_implicit_tls_to_a_plain_server_says_to_check_security_and_port(
    plain_sink: SmtpSink,
) -> None:
    """TLS spoken to a server that does not speak it: a handshake error naming the options."""
    transport = SmtpTransport(
        SmtpSettings(plain_sink.host, plain_sink.port, "tls"), allowed_hosts=LOOPBACK
    )
    with transport, pytest.raises(AuthError) as failed:
        send(transport)
    assert str(failed.value).startswith(f"The TLS handshake with 127.0.0.1:{plain_sink.port}")
    assert "--smtp-security" in str(failed.value)


def test_starttls_to_an_implicit_tls_port_times_out_with_a_hint(
    cert: tuple[Path, Path], trust: ssl.SSLContext
) -> None:
    """The server waits for a TLS hello and never greets: transient, with what to check."""
    with SmtpSink(certfile=cert[0], keyfile=cert[1], implicit_tls=True) as sink:
        config = SmtpSettings(sink.host, sink.port, "starttls")
        transport = SmtpTransport(config, allowed_hosts=LOOPBACK, ssl_context=trust, timeout=0.5)
        with transport, pytest.raises(SmtpTransientError) as failed:
            send(transport)
    assert "timed out" in str(failed.value)
    assert str(failed.value).startswith(f"The server 127.0.0.1:{sink.port} did not greet (")
    assert "check --smtp-security and --smtp-port" in str(failed.value)
    assert sink.messages == []


def test_close_is_safe_twice_and_a_later_send_connects_again(plain_sink: SmtpSink) -> None:
    """close() says QUIT; the transport can still send afterwards."""
    transport = plain(plain_sink)
    send(transport, 1)
    transport.close()
    transport.close()
    send(transport, 2)
    transport.close()
    assert transport.connections == 2
    assert len(plain_sink.messages) == 2
