"""The SMTP submission port (RFC 6409): mail programs and scripts send through the lanes.

``mailroom serve`` opens it on ``127.0.0.1:8587`` (``--submission-port
HOST:PORT`` or ``MAILROOM_SUBMISSION_LISTEN`` move it, ``--no-submission-port``
or ``off`` close it). A session goes:

1. **STARTTLS** (RFC 3207) with the certificate of ``mailroom serve
   --tls-cert/--tls-key``; without one the port offers no STARTTLS.
2. **AUTH PLAIN or LOGIN** (RFC 4954) as a mailroom user, checked by the same
   :class:`~mailroom.jmap.auth.Authenticator` as the web sign-in and JMAP, so
   a wrong password here counts toward the same lock-out (a locked name or
   address gets ``454 4.7.0``). AUTH is offered only over TLS or to a client
   on loopback: a password never crosses a network in clear text, so a port
   without a certificate serves this machine only.
3. **MAIL FROM** must be one of the user's identities (else ``550 5.7.1``),
   and so must every address in the From and Sender headers; the message
   is queued for the account of the From identity.
4. **DATA** up to ``MAILROOM_SUBMISSION_MAX_BYTES`` (25 MiB; announced as
   ``SIZE``, more is ``552``). The message gets a Message-ID and Date when it
   has none; ``X-Mailroom-Kind: KIND`` (removed) picks the lane, none goes
   ``calm`` (:mod:`mailroom.outbound.port_message`). It is queued with
   :func:`mailroom.outbound.queueing.queue_message` for the envelope the
   client gave (RCPT TO; Bcc recipients included), and ``250`` names the
   submission only after that commit.

A bad client costs only itself: the store and password checks run in worker
threads, never in the event loop; a connection idle for ``timeout`` seconds
is closed; at most ``MAX_RECIPIENTS`` recipients per message and
``MAX_AUTH_TRIES`` AUTH commands per connection; every refusal is one reply
with one sentence, never a traceback. :meth:`SubmissionPort.stop` stops
accepting, lets messages being queued finish (``grace`` seconds), then tells
the remaining clients ``421`` and closes them.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import ipaddress
import logging
import socket
import ssl
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from aiosmtpd.smtp import MISSING, SMTP, AuthResult, Envelope, Session, TLSSetupException

from mailroom.config import Settings
from mailroom.errors import ConfigError, MailroomError
from mailroom.jmap.auth import Authenticator, LockedOut, Principal
from mailroom.outbound.port_message import MessageRefused, prepare
from mailroom.outbound.queueing import OutboundError, queue_message
from mailroom.outbound.sending_as import NotYourAddress, sending_identities
from mailroom.store.engine import Store
from mailroom.store.models import User, utcnow

__all__ = [
    "DEFAULT_LISTEN",
    "MAX_AUTH_TRIES",
    "MAX_RECIPIENTS",
    "SubmissionPort",
    "parse_listen",
]

log = logging.getLogger(__name__)


def _not_login_data(record: logging.LogRecord) -> bool:
    """aiosmtpd 1.4 warns about its own deprecated ``login_data`` after every sign-in."""
    return not str(record.msg).startswith("Session.login_data is deprecated")


logging.getLogger("mail.log").addFilter(_not_login_data)

DEFAULT_LISTEN = "127.0.0.1:8587"
MAX_RECIPIENTS = 100
MAX_AUTH_TRIES = 3
_OFF = ("", "off", "no", "none", "0")

NEED_AUTH = "530 5.7.0 Sign in first (AUTH PLAIN or LOGIN with your mailroom user)."
NEED_TLS = "538 5.7.11 Start TLS first (STARTTLS); passwords are not taken in clear text."
TRY_LATER = "451 4.3.0 The message could not be queued; try again later."


def parse_listen(text: str) -> tuple[str, int] | None:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) as a pair; None for ``off``; else ConfigError."""
    value = text.strip()
    if value.lower() in _OFF:
        return None
    host, sep, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(
            f"The submission port {text!r} is not HOST:PORT; give one such as "
            f"{DEFAULT_LISTEN} (or off)."
        )
    return host, int(port)


def _peer_address(session: Session) -> str | None:
    peer: Any = session.peer
    return str(peer[0]) if isinstance(peer, tuple) and peer else None


def _is_loopback(address: str | None) -> bool:
    """Whether the client is on this machine (an IPv4 client of a dual-stack port too)."""
    try:
        ip = ipaddress.ip_address((address or "").split("%")[0])
    except ValueError:
        return False
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return (mapped or ip).is_loopback


class _Handler:
    """The aiosmtpd hooks: who signs in, whom they send as, what is queued."""

    def __init__(self, port: SubmissionPort) -> None:
        self.port = port

    # -- EHLO and AUTH -----------------------------------------------------------

    async def handle_EHLO(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        hostname: str,
        responses: list[str],
    ) -> list[str]:
        """The usual EHLO lines; AUTH only where it may be used (TLS or loopback)."""
        session.host_name = hostname
        if self._may_sign_in(session):
            return responses
        return [line for line in responses if not line[4:].upper().startswith("AUTH")]

    def _may_sign_in(self, session: Session) -> bool:
        return session.ssl is not None or _is_loopback(_peer_address(session))

    async def auth_PLAIN(self, server: SMTP, args: list[str]) -> AuthResult:
        """AUTH PLAIN (RFC 4616): ``authzid NUL authcid NUL password`` in base64."""
        if not self._may_sign_in(_session(server)):
            return await _refuse(server, NEED_TLS)
        if len(args) == 2:
            blob: Any = _b64(args[1])
            if blob is None:
                return await _refuse(server, "501 5.5.2 That is not base64.")
        else:
            blob = await server.challenge_auth("")
            if blob is MISSING:
                return AuthResult(success=False, handled=True)
        parts = bytes(blob).split(b"\0")
        if len(parts) != 3:
            return await _refuse(server, "501 5.5.2 AUTH PLAIN takes authzid, user and password.")
        return await self._sign_in(server, parts[1], parts[2])

    async def auth_LOGIN(self, server: SMTP, args: list[str]) -> AuthResult:
        """AUTH LOGIN: the user name, then the password, each in base64."""
        if not self._may_sign_in(_session(server)):
            return await _refuse(server, NEED_TLS)
        login: Any = _b64(args[1]) if len(args) == 2 else await server.challenge_auth("Username:")
        if login is None:
            return await _refuse(server, "501 5.5.2 That is not base64.")
        if login is MISSING:
            return AuthResult(success=False, handled=True)
        password: Any = await server.challenge_auth("Password:")
        if password is MISSING:
            return AuthResult(success=False, handled=True)
        return await self._sign_in(server, bytes(login), bytes(password))

    async def _sign_in(self, server: SMTP, login: bytes, password: bytes) -> AuthResult:
        """Check the password; the same refused pair again on one connection is no new guess.

        Mail programs often try PLAIN and then LOGIN with the same password; that
        counts as one failed sign-in, not two.
        """
        session = _session(server)
        try:
            name, secret = login.decode(), password.decode()
        except UnicodeDecodeError:
            return AuthResult(success=False, handled=False)
        tried = hashlib.sha256(login + b"\0" + password).digest()
        refused = server.refused if isinstance(server, _Server) else set()
        if tried in refused:
            return AuthResult(success=False, handled=False)
        try:
            principal = await asyncio.to_thread(
                self.port.auth.sign_in, name, secret, _peer_address(session), "smtp"
            )
        except LockedOut as exc:
            reply = f"454 4.7.0 Too many failed sign-ins; try again in {exc.minutes} minutes."
            return AuthResult(success=False, handled=False, message=reply)
        if principal is None:
            refused.add(tried)
            return AuthResult(success=False, handled=False)
        return AuthResult(success=True, auth_data=principal)

    # -- the envelope ------------------------------------------------------------

    async def handle_MAIL(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        """The envelope sender: signed in, and one of the user's own addresses."""
        principal = session.auth_data if session.authenticated else None
        if not isinstance(principal, Principal):
            return NEED_AUTH
        try:
            await asyncio.to_thread(self.port.check_addresses, principal, (address,))
        except NotYourAddress as exc:
            return f"550 5.7.1 {exc}"
        envelope.mail_from = address
        envelope.mail_options.extend(options)
        return "250 2.1.0 Sender ok"

    async def handle_RCPT(
        self, server: SMTP, session: Session, envelope: Envelope, address: str, options: list[str]
    ) -> str:
        """A recipient: an address with a domain, at most MAX_RECIPIENTS of them."""
        local, at, domain = address.rpartition("@")
        if not at or not local or "." not in domain.strip("."):
            return f"553 5.1.3 {address[:100]} is not an email address."
        if len(envelope.rcpt_tos) >= MAX_RECIPIENTS:
            return f"452 4.5.3 At most {MAX_RECIPIENTS} recipients per message."
        envelope.rcpt_tos.append(address)
        envelope.rcpt_options.extend(options)
        return "250 2.1.5 Recipient ok"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        """Queue the message; the reply names the submission only after the commit."""
        principal = session.auth_data
        if not session.authenticated or not isinstance(principal, Principal):
            return NEED_AUTH
        raw = envelope.original_content or b""
        peer = _peer_address(session) or "unknown"
        self.port.busy += 1
        try:
            return await asyncio.to_thread(
                self.port.accept,
                principal,
                envelope.mail_from or "",
                list(envelope.rcpt_tos),
                raw,
                client=peer,
                helo=session.host_name or peer,
                tls=session.ssl is not None,
            )
        finally:
            self.port.busy -= 1

    async def handle_exception(self, error: Exception) -> str:
        """Anything unforeseen: logged for the operator, one sentence for the client."""
        if isinstance(error, ConnectionError | ssl.SSLError | TLSSetupException):
            log.info("submission port: a connection failed: %s", error)
            return "421 4.7.0 The connection failed."
        log.error("submission port: %s", error, exc_info=error)
        return TRY_LATER


def _session(server: SMTP) -> Session:
    session = server.session
    assert session is not None  # aiosmtpd sets it before any command
    return session


def _b64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text.encode(), validate=True)
    except (binascii.Error, ValueError):
        return None


async def _refuse(server: SMTP, reply: str) -> AuthResult:
    await server.push(reply)
    return AuthResult(success=False, handled=True)


class _Server(SMTP):
    """aiosmtpd's SMTP session, known to its port from accept to close so a stop can close it."""

    def __init__(self, port: SubmissionPort, **kwargs: Any) -> None:
        super().__init__(port.handler, **kwargs)
        self.port = port
        self.refused: set[bytes] = set()  # digests of name and password refused here
        port.connections.add(self)  # from accept on: a stop waits for its transport

    def connection_lost(self, error: Exception | None) -> None:
        """Forget the connection."""
        self.port.connections.discard(self)
        super().connection_lost(error)


class SubmissionPort:
    """The listener: an asyncio loop in its own thread; ``start`` binds, ``stop`` ends it.

    ``port`` 0 picks a free port (see :attr:`address`). ``tls`` is the server
    context for STARTTLS (None: no STARTTLS). ``clock`` dates what the port adds.
    """

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        host: str = "127.0.0.1",
        port: int = 8587,
        tls: ssl.SSLContext | None = None,
        auth: Authenticator | None = None,
        max_bytes: int | None = None,
        timeout: float = 300.0,
        grace: float = 5.0,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.store = store
        self.settings = settings
        self.host, self.port = host, port
        self.tls = tls
        self.auth = auth or Authenticator(store)
        self.max_bytes = max_bytes or settings.submission_max_bytes
        self.timeout, self.grace, self.clock = timeout, grace, clock
        self.handler = _Handler(self)
        self.connections: set[_Server] = set()
        self.busy = 0  # messages being queued right now
        self.name = socket.getfqdn()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        """The host and port it listens on (the real port once started)."""
        if self._server is not None and self._server.sockets:
            return self.host, int(self._server.sockets[0].getsockname()[1])
        return self.host, self.port

    # -- the work of one message (runs in a worker thread) -----------------------

    def check_addresses(self, principal: Principal, addresses: tuple[str, ...]) -> None:
        """NotYourAddress unless every address is one of the user's identities."""
        with self.store.session() as session:
            user = session.get(User, principal.user_id)
            own = sending_identities(session, user) if user is not None else {}
        for address in addresses:
            if address.lower() not in own:
                raise NotYourAddress(address)

    def accept(
        self,
        principal: Principal,
        mail_from: str,
        recipients: list[str],
        raw: bytes,
        *,
        client: str,
        helo: str,
        tls: bool,
    ) -> str:
        """Queue one submitted message; the SMTP reply (one sentence either way)."""
        try:
            now = self.clock()
            message = prepare(raw, client=client, helo=helo, by=self.name, tls=tls, now=now)
            with self.store.session() as session:
                user = session.get(User, principal.user_id)
                own = sending_identities(session, user) if user is not None else {}
                for address in (mail_from, *message.authors):
                    if address.lower() not in own:
                        raise NotYourAddress(address)
                identity = own[message.authors[0].lower()]
                submission = queue_message(
                    session,
                    settings=self.settings,
                    account_id=identity.account_id,
                    raw=message.raw,
                    envelope={
                        "mailFrom": {"email": mail_from, "parameters": None},
                        "rcptTo": [{"email": r, "parameters": None} for r in recipients],
                    },
                    kind=message.kind,
                    identity_id=identity.id,
                    now=now,
                )
                session.flush()
                submission_id = submission.id
        except NotYourAddress as exc:
            return f"550 5.7.1 {exc}"
        except (MessageRefused, OutboundError) as exc:
            return f"554 5.6.0 {exc}"
        except MailroomError as exc:
            log.warning("submission port: a message of %s was not queued: %s", principal.name, exc)
            return TRY_LATER
        return f"250 2.0.0 Queued as submission {submission_id}."

    # -- start and stop ----------------------------------------------------------

    def _factory(self) -> _Server:
        return _Server(
            self,
            hostname=self.name,
            ident="ESMTP mailroom submission",
            data_size_limit=self.max_bytes,
            tls_context=self.tls,
            auth_require_tls=False,  # enforced per client: TLS or loopback (_may_sign_in)
            command_call_limit={"AUTH": MAX_AUTH_TRIES, "*": 100_000},
            timeout=self.timeout,
            loop=self._loop,
        )

    def start(self) -> SubmissionPort:
        """Bind and serve in a thread; a ConfigError in one sentence when it cannot bind."""
        loop = asyncio.new_event_loop()
        try:
            server = loop.run_until_complete(
                loop.create_server(self._factory, host=self.host, port=self.port)
            )
        except OSError as exc:
            loop.close()
            where = f"{self.host}:{self.port}"
            reason = exc.strerror or str(exc)
            raise ConfigError(
                f"The submission port cannot listen on {where} ({reason}); free it, move it "
                "with --submission-port HOST:PORT or switch it off with --no-submission-port."
            ) from None
        self._loop, self._server = loop, server
        self._thread = threading.Thread(
            target=loop.run_forever, name="mailroom-submission-port", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, let queueing messages finish, say 421 to the rest; idempotent."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(RuntimeError, TimeoutError):
            asyncio.run_coroutine_threadsafe(self._close(), loop).result(self.grace + 10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
        self._loop = self._thread = self._server = None

    async def _close(self) -> None:
        assert self._server is not None
        loop = asyncio.get_running_loop()
        # Stop accepting first and let connections accepted a moment ago get their
        # transport: Python 3.11 leaks the socket of one accepted during Server.close().
        for listening in self._server.sockets:
            loop.remove_reader(listening.fileno())
        for _ in range(5):
            await asyncio.sleep(0)
        self._server.close()
        deadline = loop.time() + self.grace
        while self.busy and loop.time() < deadline:
            await asyncio.sleep(0.05)
        # Until every connection is gone (one accepted just before the close included):
        # tell it 421 and close it; a closed transport lets go of its socket a turn later.
        bye = b"421 4.3.2 mailroom is shutting down; try again later.\r\n"
        for _ in range(200):
            for connection in list(self.connections):
                transport = connection.transport
                if isinstance(transport, asyncio.WriteTransport) and not transport.is_closing():
                    with contextlib.suppress(Exception):
                        transport.write(bye)
                    transport.close()
            await asyncio.sleep(0.01)
            if not self.connections:
                break
        await self._server.wait_closed()

    def __enter__(self) -> SubmissionPort:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
