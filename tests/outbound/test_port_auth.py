"""Signing in on the submission port: PLAIN and LOGIN, the shared lock-out, TLS or loopback only."""

from __future__ import annotations

import base64
import smtplib
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from mailroom.jmap.auth import Authenticator, LockedOut, SignInLimiter, name_key
from mailroom.store.engine import Store
from mailroom.store.models import SignInFailure
from tests.jmap.conftest import self_signed
from tests.outbound.port_support import (
    POLICY,
    Clock,
    PortSetup,
    add_people,
    mail,
    make_port,
    port_setup,
    server_tls,
    submissions,
)


@pytest.fixture
def setup(store: Store, tmp_path: Path) -> Iterator[PortSetup]:
    """The started port over me and eve."""
    yield from port_setup(store, tmp_path)


def _login(setup: PortSetup, name: str, password: str) -> tuple[int, bytes]:
    host, number = setup.port.address
    with smtplib.SMTP(host, number, timeout=30) as smtp:
        smtp.starttls(context=setup.trust)
        try:
            smtp.login(name, password)
        except smtplib.SMTPAuthenticationError as exc:
            return exc.smtp_code, exc.smtp_error
        return 235, b""


def _failures(store: Store, name: str) -> int:
    with store.session() as session:
        count = session.scalar(
            select(func.count())
            .select_from(SignInFailure)
            .where(SignInFailure.key == name_key(name))
        )
    return int(count or 0)


def test_auth_login_works_as_well_as_plain(store: Store, setup: PortSetup) -> None:
    """A client that only speaks AUTH LOGIN signs in and sends."""
    host, number = setup.port.address
    with smtplib.SMTP(host, number, timeout=30) as smtp:
        smtp.starttls(context=setup.trust)
        smtp.ehlo()
        assert "LOGIN" in smtp.esmtp_features["auth"] and "PLAIN" in smtp.esmtp_features["auth"]
        smtp.user, smtp.password = "me", "pw"
        code, _ = smtp.auth("LOGIN", smtp.auth_login, initial_response_ok=False)
        assert code == 235
        smtp.sendmail("me@example.org", ["bob@example.net"], mail())
    assert len(submissions(store)) == 1


def test_wrong_passwords_count_toward_the_lockout_the_web_sign_in_shares(
    store: Store, setup: PortSetup
) -> None:
    """Three wrong passwords lock the name: the right one gets 454 here and LockedOut on the web."""
    for attempt in range(1, 4):
        code, reply = _login(setup, "me", "wrong")
        assert code == 535, reply
        assert _failures(store, "me") == attempt
    code, reply = _login(setup, "me", "pw")
    assert code == 454 and b"Too many failed sign-ins; try again in 15 minutes" in reply
    web = Authenticator(store, SignInLimiter(store, POLICY, clock=setup.clock))
    with pytest.raises(LockedOut):
        web.sign_in("me", "pw", "127.0.0.1")
    setup.clock.advance(16 * 60)
    assert _login(setup, "me", "pw")[0] == 235
    assert _login(setup, "nobody", "pw")[0] == 535  # unknown names count like wrong passwords
    assert _failures(store, "nobody") == 1


def test_one_connection_gets_three_auth_commands(store: Store, setup: PortSetup) -> None:
    """The fourth AUTH on one connection closes it (guessing costs a new connection)."""
    host, number = setup.port.address
    with smtplib.SMTP(host, number, timeout=30) as smtp:
        smtp.starttls(context=setup.trust)
        smtp.ehlo()
        for name in ("a", "b", "c"):
            assert smtp.docmd("AUTH", "PLAIN " + _plain(name, "x"))[0] == 535
        code, _ = smtp.docmd("AUTH", "PLAIN " + _plain("d", "x"))
        assert code == 421
        with pytest.raises(smtplib.SMTPServerDisconnected):
            smtp.noop()


def _plain(name: str, password: str) -> str:
    return base64.b64encode(f"\0{name}\0{password}".encode()).decode()


def _own_address() -> str | None:
    """An address of this machine that is not loopback (the client then is no loopback peer)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this picks the route's source
            address: str = probe.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_without_tls_auth_is_offered_to_loopback_clients_only(store: Store, tmp_path: Path) -> None:
    """No certificate: no STARTTLS; loopback signs in; another address gets no AUTH and 538."""
    add_people(store)
    with make_port(store, Clock(), None) as port, smtplib.SMTP(*port.address, timeout=30) as smtp:
        smtp.ehlo()
        assert not smtp.has_extn("starttls") and smtp.has_extn("auth")
        smtp.login("me", "pw")
        smtp.sendmail("me@example.org", ["bob@example.net"], mail())
    address = _own_address()
    if address is None:
        pytest.skip("this machine has no address besides loopback")
    with (
        make_port(store, Clock(), None, host=address) as port,
        smtplib.SMTP(*port.address, timeout=30) as smtp,
    ):
        smtp.ehlo()
        assert not smtp.has_extn("auth")
        code, reply = smtp.docmd("AUTH", "PLAIN " + _plain("me", "pw"))
        assert code == 538 and b"Start TLS first" in reply
        assert smtp.mail("me@example.org")[0] == 530
    cert = self_signed(tmp_path)
    trust = ssl.create_default_context(cafile=str(cert[0]))
    trust.check_hostname = False  # the certificate names 127.0.0.1, the client dials another
    with (
        make_port(store, Clock(), server_tls(cert), host=address) as port,
        smtplib.SMTP(*port.address, timeout=30) as smtp,
    ):
        smtp.ehlo()
        assert smtp.has_extn("starttls") and not smtp.has_extn("auth")
        smtp.starttls(context=trust)
        smtp.ehlo()
        assert smtp.has_extn("auth")
        smtp.login("me", "pw")
        smtp.sendmail("me@example.org", ["bob@example.net"], mail(subject="over tls"))
    assert len(submissions(store)) == 2
