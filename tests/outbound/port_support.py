"""What the submission port tests share: two users with accounts, a started port, a client.

``me`` (password ``pw``) owns the account ``work`` (me@example.org, alias
identity alias@example.org); ``eve`` owns eve@example.org. The port listens
on a free loopback port with STARTTLS on a self-signed certificate, and
checks passwords with a lock-out of 3 failures per name inside 15 minutes on
a clock the test moves (``tests.outbound.core_support.Clock``).
"""

from __future__ import annotations

import smtplib
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select

from mailroom.config import Settings
from mailroom.jmap.auth import Authenticator, LockoutPolicy, SignInLimiter, set_password
from mailroom.outbound.submission_port import SubmissionPort
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.store.engine import Store
from mailroom.store.models import Blob, Identity, Submission
from tests.jmap.conftest import self_signed
from tests.outbound.core_support import Clock

POLICY = LockoutPolicy(max_failures_per_name=3, max_failures_per_address=10)


def add_people(store: Store) -> None:
    """``me`` with work (me@example.org + alias@example.org), ``eve`` with eve@example.org."""
    with store.session() as session:
        set_password(session, "me", "pw")
        set_password(session, "eve", "evepw")
        me = get_or_create_user(session, "me")
        work = get_or_create_account(
            session,
            me,
            "work",
            "local",
            {"email": "me@example.org", "display_name": "Me", "aliases": ["alias@example.org"]},
        )
        eve = get_or_create_user(session, "eve")
        get_or_create_account(session, eve, "home", "local", {"email": "eve@example.org"})
        session.flush()
        session.add(Identity(user_id=me.id, account_id=work.id, email="alias@example.org"))


def server_tls(cert: tuple[Path, Path]) -> ssl.SSLContext:
    """The server side of STARTTLS with the test certificate."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(cert[0]), str(cert[1]))
    return context


def make_port(
    store: Store, clock: Clock, tls: ssl.SSLContext | None, host: str = "127.0.0.1", **kwargs: Any
) -> SubmissionPort:
    """A port on a free port of ``host`` (not started)."""
    auth = Authenticator(store, SignInLimiter(store, POLICY, clock=clock))
    settings = Settings(data_dir=Path("/nonexistent"), submission_max_bytes=200_000)
    return SubmissionPort(
        store, settings, host=host, port=0, tls=tls, auth=auth, clock=clock, **kwargs
    )


@dataclass
class PortSetup:
    """A started port over ``me`` and ``eve``, the client's trust and the clock."""

    port: SubmissionPort
    trust: ssl.SSLContext
    clock: Clock
    cert: tuple[Path, Path]


def port_setup(store: Store, directory: Path) -> Iterator[PortSetup]:
    """The body of each test file's fixture: people, a certificate, a started STARTTLS port."""
    add_people(store)
    cert = self_signed(directory)
    clock = Clock()
    trust = ssl.create_default_context(cafile=str(cert[0]))
    with make_port(store, clock, server_tls(cert)) as port:
        yield PortSetup(port, trust, clock, cert)


def client(setup: PortSetup, login: str = "me") -> smtplib.SMTP:
    """An SMTP client that did STARTTLS and AUTH (``me``/``pw`` or ``eve``/``evepw``)."""
    host, number = setup.port.address
    smtp = smtplib.SMTP(host, number, timeout=30)
    smtp.starttls(context=setup.trust)
    smtp.login(login, {"me": "pw", "eve": "evepw"}[login])
    return smtp


def mail(
    sender: str = "Me <me@example.org>",
    to: str = "bob@example.net",
    *,
    subject: str = "Hello",
    extra: str = "",
    body: str = "Hi Bob.\r\n",
) -> bytes:
    """A message as a mail program writes it (no Message-ID or Date unless in ``extra``)."""
    return f"From: {sender}\r\nTo: {to}\r\nSubject: {subject}\r\n{extra}\r\n{body}".encode()


def submissions(store: Store) -> list[tuple[Submission, bytes]]:
    """Every submission with its queued bytes, oldest first."""
    with store.session() as session:
        rows = session.scalars(select(Submission).order_by(Submission.id)).all()
        found = [(row, session.get(Blob, row.raw_sha256)) for row in rows]
        session.expunge_all()
        return [(row, blob.data if blob is not None else b"") for row, blob in found]
