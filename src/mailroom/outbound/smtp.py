"""The SMTP transport: one account's outgoing server, one kept connection (RFC 5321).

:class:`SmtpTransport` implements :class:`~mailroom.outbound.base.Transport` with
the standard library's :mod:`smtplib` (it speaks the protocol, AUTH PLAIN/LOGIN and
STARTTLS correctly and is always there; what it lacks — pinning the vetted address,
per-recipient results, the error mapping — is a small layer here):

* **Where it connects**: the SSRF guard (:func:`mailroom.providers.netguard.check_host`,
  with the operator's allow-list) resolves the host once and the connection goes
  to a vetted address, while TLS still checks the certificate against the host
  *name*. ``security == "none"`` only ever talks to loopback addresses.
* **Security**: ``tls`` is TLS from the first byte (RFC 8314, port 465);
  ``starttls`` upgrades after EHLO and refuses to go on when the server does not
  offer STARTTLS (RFC 3207) — nothing is sent in the clear. Certificates are checked
  against the system's trust store (``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` add a
  private authority); an untrusted one is an :class:`AuthError` in plain words.
  AUTH (PLAIN, else LOGIN; RFC 4954) is only sent over TLS or to this machine.
* **Results per recipient**: each accepted recipient maps to the server's final
  reply to the message ("250 2.0.0 Ok: queued as ..."), refused ones to
  ``(code, reply)``. A ``452`` to a RCPT after others were accepted means "too many
  recipients in one transaction" (RFC 5321 §4.5.3.1.10): the rest go in the next
  transaction over the same connection. Once a part was accepted, a later failure
  is reported per recipient, never raised, so a retry cannot send the part twice.
* **Errors** (the contract of :mod:`mailroom.outbound.base`): 5xx →
  :class:`RefusedError` (``code``, ``reply``); 530/534/535/538 and TLS/AUTH problems
  → :class:`AuthError`; 4xx, a lost connection, timeouts → :class:`TransientError`,
  or :class:`RateLimitError` when a 421/45x reply says to slow down ("too many",
  "rate", "limit"). SMTP's transient errors carry ``code`` and ``reply`` as well.
* **One connection is kept** between sends: the next send begins with RSET, and
  connects again when that shows the server closed it. :meth:`SmtpTransport.close`
  says QUIT. The final reply to DATA is waited for up to 10 minutes (RFC 5321
  §4.5.3.2.6): giving up earlier would make a retry send the message twice.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import re
import smtplib
import socket
import ssl
import threading
from collections.abc import Iterable, Sequence
from typing import Final

from mailroom.errors import ConfigError, ProviderError
from mailroom.outbound.base import RefusedError, SendResult
from mailroom.outbound.smtp_settings import SmtpSettings
from mailroom.providers import netguard
from mailroom.providers.base import AuthError, RateLimitError, TransientError

__all__ = ["SmtpRateLimitError", "SmtpTransientError", "SmtpTransport"]

DEFAULT_TIMEOUT: Final = 30.0
DATA_TIMEOUT: Final = 600.0  # RFC 5321 4.5.3.2.6: the wait for the reply to the final "."
AUTH_CODES: Final = frozenset({530, 534, 535, 538})  # login needed / refused / too weak
_SLOW_DOWN = re.compile(r"too many|rate|limit|slow down|throttl", re.IGNORECASE)
_LINE_ENDS = re.compile(rb"\r\n|\r|\n")
_MECHANISMS: Final = ("PLAIN", "LOGIN")


class SmtpTransientError(TransientError):
    """A 4xx reply (or a lost connection: ``code`` None); retry later."""

    def __init__(self, message: str, *, code: int | None = None, reply: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.reply = reply


class SmtpRateLimitError(RateLimitError):
    """A 421/45x reply asking to slow down."""

    def __init__(self, message: str, *, code: int, reply: str) -> None:
        super().__init__(message)
        self.code = code
        self.reply = reply


class _Client(smtplib.SMTP):
    """smtplib connected to a fixed (vetted) address; TLS is checked against ``host``."""

    def __init__(
        self, host: str, address: str, *, implicit_tls: ssl.SSLContext | None, timeout: float
    ) -> None:
        super().__init__(local_hostname=_local_hostname(), timeout=timeout)
        self._host = host  # smtplib's name for the server_hostname of TLS
        self._address = address
        self._implicit_tls = implicit_tls

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        sock = socket.create_connection((self._address, port), timeout, self.source_address)
        if self._implicit_tls is None:
            return sock
        try:
            return self._implicit_tls.wrap_socket(sock, server_hostname=self._host)
        except BaseException:
            sock.close()
            raise


@functools.cache
def _local_hostname() -> str:
    # smtplib looks the machine's FQDN up for every client, which can take seconds.
    return smtplib.SMTP().local_hostname


@functools.cache
def _system_trust() -> ssl.SSLContext:
    # Loading the system store takes ~0.3 s; a context is safe to share.
    return ssl.create_default_context(purpose=ssl.Purpose.SERVER_AUTH)


def _text(code: int, reply: bytes | str) -> str:
    """A reply as one line: ``"550 5.1.1 unknown user"``."""
    words = reply.decode("utf-8", "replace") if isinstance(reply, bytes) else reply
    return f"{code} {' '.join(words.split())}".strip()


def _cause(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    text = getattr(exc, "strerror", None) or str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:200]


def _unique(addresses: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    unique: list[str] = []
    for address in addresses:
        if address.lower() not in seen:
            seen.add(address.lower())
            unique.append(address)
    return unique


class SmtpTransport:
    """Sends one account's mail through its SMTP server (see the module docstring)."""

    def __init__(
        self,
        config: SmtpSettings,
        password: str | None = None,
        *,
        allowed_hosts: Iterable[str] = (),
        ssl_context: ssl.SSLContext | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        data_timeout: float = DATA_TIMEOUT,
    ) -> None:
        if config.login and not password:
            raise ConfigError(f"The SMTP login {config.login!r} has no password to log in with.")
        self.config = config
        self._password = password
        self._allowed = tuple(allowed_hosts)
        self._ssl_context = ssl_context
        self._timeout = timeout
        self._data_timeout = data_timeout
        self._client: _Client | None = None
        self._lock = threading.Lock()
        self.connections = 0  # how many connections were opened (reuse shows in it)

    def __enter__(self) -> SmtpTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the Transport protocol -------------------------------------------------

    def send(
        self, envelope_from: str, recipients: Sequence[str], raw: bytes, *, message_id: str
    ) -> SendResult:
        """Hand ``raw`` over for ``recipients``; see the module docstring for the outcomes."""
        pending = _unique(recipients)
        if not pending:
            raise RefusedError("The message has no recipients.")
        data = _LINE_ENDS.sub(b"\r\n", raw)  # SMTP lines end in CRLF; a bare LF must not pass
        accepted: dict[str, str] = {}
        refused: dict[str, tuple[int, str]] = {}
        with self._lock:
            client = self._ready()
            while pending:
                try:
                    reply, took, refused_now, pending = self._transaction(
                        client, envelope_from, pending, data
                    )
                except ProviderError as exc:
                    if not accepted:
                        raise
                    code = getattr(exc, "code", None) or 451
                    refused.update({r: (code, str(exc)) for r in pending})
                    break
                accepted.update(dict.fromkeys(took, reply))
                refused.update(refused_now)
        return SendResult(message_id=message_id, accepted=accepted, refused=refused)

    def close(self) -> None:
        """QUIT and close the kept connection (best effort); safe to call twice."""
        with self._lock:
            client, self._client = self._client, None
            if client is not None:
                with contextlib.suppress(OSError):
                    client.quit()
                client.close()

    # -- one transaction ----------------------------------------------------------

    def _transaction(
        self, client: _Client, sender: str, recipients: list[str], data: bytes
    ) -> tuple[str, list[str], dict[str, tuple[int, str]], list[str]]:
        """MAIL, RCPT..., DATA: (final reply, accepted, refused, left for the next one)."""
        try:
            options = self._mail_options(client, sender, recipients, data)
            code, reply = client.mail(sender, options)
            if code != 250:
                raise self._failure(code, reply, f"the sender <{sender}>")
            accepted: list[str] = []
            refused: dict[str, tuple[int, str]] = {}
            later: list[str] = []
            for index, recipient in enumerate(recipients):
                code, reply = client.rcpt(recipient)
                if code in (250, 251):
                    accepted.append(recipient)
                elif code == 452 and accepted:  # too many recipients for one transaction
                    later = recipients[index:]
                    break
                elif code == 421:
                    raise self._failure(code, reply, f"the recipient <{recipient}>")
                else:
                    refused[recipient] = (code, _text(code, reply))
            if not accepted:
                raise self._all_refused(refused)
            code, reply = self._data(client, data)
            if code != 250:
                raise self._failure(code, reply, "the message")
            return _text(code, reply), accepted, refused, later
        except smtplib.SMTPResponseException as exc:  # DATA answered with something but 354
            self._reset_or_drop(client)
            raise self._failure(exc.smtp_code, exc.smtp_error, "the message") from None
        except ProviderError as exc:
            if getattr(exc, "code", None) == 421:
                self._drop()
            else:
                self._reset_or_drop(client)
            raise
        except OSError as exc:
            self._drop()
            raise SmtpTransientError(
                f"The connection to {self.config.where} was lost while sending ({_cause(exc)}); "
                "it will be tried again.",
            ) from None

    def _mail_options(
        self, client: _Client, sender: str, recipients: list[str], data: bytes
    ) -> list[str]:
        options: list[str] = []
        if client.has_extn("size"):
            limit = client.esmtp_features["size"].strip()
            if limit.isdigit() and 0 < int(limit) < len(data):
                raise RefusedError(
                    f"The message is {len(data)} bytes, more than the {int(limit)} bytes "
                    f"{self.config.host} accepts.",
                    code=552,
                )
            options.append(f"SIZE={len(data)}")
        if not data.isascii() and client.has_extn("8bitmime"):
            options.append("BODY=8BITMIME")
        if not all(a.isascii() for a in [sender, *recipients]):
            if not client.has_extn("smtputf8"):
                raise RefusedError(
                    f"The server {self.config.host} does not accept international addresses "
                    "(SMTPUTF8).",
                    code=553,
                )
            options.append("SMTPUTF8")
        return options

    def _data(self, client: _Client, data: bytes) -> tuple[int, bytes]:
        sock = client.sock
        if sock is not None:
            sock.settimeout(self._data_timeout)
        try:
            return client.data(data)
        finally:
            if client.sock is not None:
                client.sock.settimeout(self._timeout)

    # -- errors -------------------------------------------------------------------

    def _failure(self, code: int, reply: bytes | str, what: str) -> ProviderError:
        """The provider error for a reply ``code`` to ``what``."""
        text = _text(code, reply)
        host = self.config.host
        if code in AUTH_CODES:
            return AuthError(
                f"The server {host} refused {what} without a valid login ({text}); check "
                "the SMTP login and password.",
                reason=f"the SMTP server wants a valid login ({text})",
            )
        if code >= 500:
            return RefusedError(
                f"The server {host} refused {what} ({text}).", code=code, reply=text
            )
        if code in (421, 450, 451, 452) and _SLOW_DOWN.search(text):
            return SmtpRateLimitError(
                f"The server {host} asked to slow down ({text}).", code=code, reply=text
            )
        return SmtpTransientError(
            f"The server {host} deferred {what} ({text}); it will be tried again.",
            code=code,
            reply=text,
        )

    def _all_refused(self, refused: dict[str, tuple[int, str]]) -> ProviderError:
        """Every recipient refused: transient if any refusal was (it may pass later)."""
        replies = list(refused.values())
        code, text = next((r for r in replies if r[0] < 500), replies[0])
        return self._failure(code, text.partition(" ")[2], "every recipient")

    # -- the connection -------------------------------------------------------------

    def _drop(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()

    def _reset_or_drop(self, client: _Client) -> None:
        """RSET after a refused transaction, so the connection can be used again."""
        try:
            code, _reply = client.rset()
        except OSError:
            code = 0
        if code != 250:
            self._drop()

    def _ready(self) -> _Client:
        """The kept connection if it still answers RSET, else a new one."""
        if self._client is not None:
            self._reset_or_drop(self._client)
        if self._client is None:
            self._client = self._connect()
            self.connections += 1
        return self._client

    def _connect(self) -> _Client:
        config = self.config
        addresses = netguard.check_host(config.host, config.port, self._allowed)
        if config.security == "none" and not all(
            ipaddress.ip_address(a).is_loopback for a in addresses
        ):
            raise AuthError(
                f"Unencrypted SMTP is only allowed to this machine, and {config.host} is not "
                "it; use --smtp-security tls or starttls.",
                reason="unencrypted SMTP to another machine",
            )
        context = self._ssl_context or _system_trust()
        implicit = context if config.security == "tls" else None
        last: OSError | None = None
        for address in addresses:
            client = _Client(config.host, address, implicit_tls=implicit, timeout=self._timeout)
            try:
                code, reply = client.connect(config.host, config.port)
            except ssl.SSLCertVerificationError as exc:
                client.close()
                raise self._bad_certificate(exc) from None
            except ssl.SSLError:
                client.close()
                raise self._bad_handshake("The TLS handshake") from None
            except smtplib.SMTPServerDisconnected as exc:  # connected, but no greeting
                client.close()
                raise SmtpTransientError(
                    f"The server {config.where} did not greet ({_cause(exc)}); check "
                    "--smtp-security and --smtp-port if this goes on.",
                ) from None
            except OSError as exc:
                client.close()
                last = exc
                continue
            try:
                self._open(client, code, reply, context)
            except BaseException:
                client.close()
                raise
            return client
        raise SmtpTransientError(
            f"Cannot connect to {config.where} ({_cause(last) if last else 'no address'}); "
            "it will be tried again.",
        )

    def _open(self, client: _Client, code: int, reply: bytes, context: ssl.SSLContext) -> None:
        """Greeting, EHLO, STARTTLS, AUTH on a fresh connection."""
        try:
            if code >= 500:  # not about this message: the server will not talk to us
                raise AuthError(
                    f"The server {self.config.where} refuses connections from here "
                    f"({_text(code, reply)}).",
                    reason=f"the SMTP server refuses connections ({_text(code, reply)})",
                )
            if code != 220:
                raise self._failure(code, reply, "the connection")
            client.ehlo_or_helo_if_needed()
            if self.config.security == "starttls":
                self._starttls(client, context)
            if self.config.login:
                self._login(client)
        except smtplib.SMTPResponseException as exc:
            raise self._failure(exc.smtp_code, exc.smtp_error, "the greeting") from None
        except OSError as exc:
            raise SmtpTransientError(
                f"The connection to {self.config.where} failed before sending "
                f"({_cause(exc)}); it will be tried again.",
            ) from None

    def _starttls(self, client: _Client, context: ssl.SSLContext) -> None:
        if not client.has_extn("starttls"):
            raise AuthError(
                f"The server {self.config.where} does not offer STARTTLS, so mail would go "
                "unencrypted; use --smtp-security tls if it speaks TLS from the start (port 465).",
                reason="the SMTP server does not offer STARTTLS",
            )
        try:
            client.starttls(context=context)
        except ssl.SSLCertVerificationError as exc:
            raise self._bad_certificate(exc) from None
        except ssl.SSLError:
            raise self._bad_handshake("The STARTTLS handshake") from None
        client.ehlo()

    def _login(self, client: _Client) -> None:
        host, login = self.config.host, self.config.login or ""
        if not isinstance(client.sock, ssl.SSLSocket) and not self._loopback(client):
            raise AuthError(
                f"The password for {host} would go unencrypted; use --smtp-security tls or "
                "starttls.",
                reason="AUTH without TLS refused",
            )
        offered = client.esmtp_features.get("auth", "").upper().split()
        mechanism = next((m for m in _MECHANISMS if m in offered), None)
        if mechanism is None:
            raise AuthError(
                f"The server {host} offers no login mailroom can use (PLAIN or LOGIN); "
                "remove the SMTP login if it needs none.",
                reason="the SMTP server offers no AUTH PLAIN or LOGIN",
            )
        client.user, client.password = login, self._password or ""
        authenticate = client.auth_plain if mechanism == "PLAIN" else client.auth_login
        try:
            client.auth(mechanism, authenticate)
        except smtplib.SMTPAuthenticationError as exc:
            if exc.smtp_code < 500:
                raise self._failure(exc.smtp_code, exc.smtp_error, "the login") from None
            raise AuthError(
                f"The server {host} refused the login for {login!r}; check the SMTP user "
                "name and password.",
                reason="the SMTP server refused the login; check the user name and password",
            ) from None

    @staticmethod
    def _loopback(client: _Client) -> bool:
        return ipaddress.ip_address(client._address).is_loopback

    def _bad_certificate(self, exc: ssl.SSLCertVerificationError) -> AuthError:
        why = exc.verify_message or "verification failed"
        return AuthError(
            f"The server {self.config.host} presented a certificate that is not trusted for it "
            f"({why}); check the host name, or have the operator trust its authority.",
            reason=f"TLS certificate not trusted ({why})",
        )

    def _bad_handshake(self, what: str) -> AuthError:
        return AuthError(
            f"{what} with {self.config.where} failed; check --smtp-security and --smtp-port "
            "(implicit TLS is usually port 465, STARTTLS port 587).",
            reason="TLS handshake failed; check the SMTP security and port",
        )
