"""A real SMTP server on loopback (aiosmtpd) that keeps what it accepted and answers as told.

``SmtpSink`` runs aiosmtpd's ``Controller`` in its own thread on a free port.
It can require AUTH (PLAIN/LOGIN against one login), offer STARTTLS or speak
implicit TLS with a given certificate, and answer DATA with a scripted list of
replies (``sink.script(["451 4.3.0 try later"] * 3)``: the next three messages
get 451, later ones 250). Accepted messages are appended to ``sink.messages``.

``sink.refuse({"x@example.net": "550 5.1.1 no such user"})`` answers RCPT TO for
those addresses with the given reply. ``sink.hold()`` keeps the reply to DATA
back *after* the message was recorded as accepted, until ``sink.release()`` (or
``stop``): the moment a client can be killed with the server holding its mail.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import threading
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session


@dataclass(frozen=True)
class Received:
    """One message the sink accepted."""

    mail_from: str
    rcpt_tos: tuple[str, ...]
    data: bytes
    login: str | None
    at: float


@dataclass
class _Handler:
    sink: SmtpSink
    replies: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)

    async def handle_RCPT(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        rcpt_options: list[str],
    ) -> str:
        with self.sink.lock:
            reply = self.refused.get(address.lower())
        if reply is not None:
            return reply
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(rcpt_options)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        with self.sink.lock:
            self.sink.attempts += 1
            if self.replies:
                return self.replies.pop(0)
            data = envelope.content
            assert isinstance(data, bytes)
            login = session.auth_data.login.decode() if session.authenticated else None
            self.sink.messages.append(
                Received(
                    envelope.mail_from or "",
                    tuple(envelope.rcpt_tos),
                    data,
                    login,
                    time.monotonic(),
                )
            )
        while not self.sink.released.is_set():
            await asyncio.sleep(0.01)
        return "250 2.0.0 Ok: queued"


class _QuietController(Controller):
    """aiosmtpd warns about AUTH without STARTTLS even under implicit TLS; that is intended here."""

    def factory(self) -> SMTP:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Requiring AUTH while not requiring TLS")
            return super().factory()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class SmtpSink:
    """A loopback SMTP server; use as a context manager or call ``start``/``stop``."""

    def __init__(
        self,
        *,
        login: str | None = None,
        password: str | None = None,
        certfile: Path | None = None,
        keyfile: Path | None = None,
        implicit_tls: bool = False,
    ) -> None:
        self.host = "127.0.0.1"
        self.port = _free_port()
        self.messages: list[Received] = []
        self.attempts = 0
        self.lock = threading.Lock()
        self.released = threading.Event()
        self.released.set()
        self._handler = _Handler(self)
        self._login, self._password = login, password
        context: ssl.SSLContext | None = None
        if certfile and keyfile:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(str(certfile), str(keyfile))
        kwargs: dict[str, Any] = {"hostname": self.host, "port": self.port}
        if login is not None:
            kwargs.update(
                authenticator=self._authenticate,
                auth_required=True,
                # aiosmtpd only counts STARTTLS as TLS; implicit TLS is TLS from the start.
                auth_require_tls=context is not None and not implicit_tls,
            )
        if context is not None and implicit_tls:
            kwargs["ssl_context"] = context
        elif context is not None:
            kwargs.update(tls_context=context, require_starttls=True)
        self._controller = _QuietController(self._handler, **kwargs)

    def _authenticate(
        self, server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any
    ) -> AuthResult:
        if not isinstance(data, LoginPassword):
            return AuthResult(success=False, handled=False)
        ok = data.login.decode() == self._login and data.password.decode() == self._password
        return AuthResult(success=ok, handled=False, auth_data=data)

    def script(self, replies: Iterable[str]) -> None:
        """The next DATA commands are answered with these replies, in order."""
        with self.lock:
            self._handler.replies = list(replies)

    def refuse(self, replies: dict[str, str]) -> None:
        """Answer RCPT TO for these addresses (any case) with their reply from now on."""
        with self.lock:
            self._handler.refused = {address.lower(): reply for address, reply in replies.items()}

    def hold(self) -> None:
        """Keep the reply to the next DATA commands back, after recording their messages."""
        self.released.clear()

    def release(self) -> None:
        """Answer the held DATA commands (and every later one) at once."""
        self.released.set()

    def start(self) -> SmtpSink:
        """Start serving; returns self."""
        self._controller.start()
        return self

    def stop(self) -> None:
        """Stop serving (idempotent)."""
        self.release()
        with contextlib.suppress(AssertionError):  # already stopped
            self._controller.stop()

    def __enter__(self) -> SmtpSink:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
