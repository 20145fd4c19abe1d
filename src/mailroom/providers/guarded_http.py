"""HTTP through the SSRF guard: the one httpx transport every outbound HTTP request uses.

Provider APIs (Gmail, Graph), OAuth token endpoints and webhook deliveries all
reach hosts that a user or an operator named, so each request's host is vetted
by :func:`mailroom.providers.netguard.check_host` (public addresses only, unless
the operator allow-lists the host in ``MAILROOM_ALLOWED_PRIVATE_HOSTS``) and the
request is sent to a vetted address: a second DNS answer cannot point it
elsewhere. The name stays in ``Host`` and is the TLS server name, so certificates
are checked for the name. A vetting is reused for :data:`VETTED_SECONDS` (a
client making many requests does not resolve the name for each one, and a
provider's changing addresses are followed); the next vetted address is tried
when one refuses the connection.

A refused host raises the guard's :class:`~mailroom.providers.base.AuthError`, a
name that does not resolve its :class:`~mailroom.providers.base.TransientError`,
both with the guard's one sentence. Only public httpx interfaces are used.
"""

from __future__ import annotations

import functools
import ipaddress
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import httpx

from mailroom.errors import ConfigError
from mailroom.providers.netguard import check_host

__all__ = ["VETTED_SECONDS", "GuardedTransport", "guarded_client", "require_https"]

VETTED_SECONDS = 60.0


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # Loading the CA store takes a noticeable time, and every client (one per sync job,
    # per delivery round) would load it again; a context is safe to share.
    return httpx.create_ssl_context()


class GuardedTransport(httpx.BaseTransport):
    """An httpx transport that connects only to addresses the SSRF guard vetted."""

    def __init__(
        self,
        allowed_hosts: Iterable[str] = (),
        *,
        inner: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._allowed = tuple(allowed_hosts)
        self._inner = inner or httpx.HTTPTransport(verify=_tls_context())
        self._clock = clock
        self._vetted: dict[tuple[str, int], tuple[float, list[str]]] = {}
        self._lock = threading.Lock()

    def _addresses(self, host: str, port: int) -> list[str]:
        now = self._clock()
        with self._lock:
            known = self._vetted.get((host, port))
        if known is not None and now - known[0] < VETTED_SECONDS:
            return known[1]
        addresses = check_host(host, port, self._allowed)
        with self._lock:
            self._vetted[(host, port)] = (now, addresses)
        return addresses

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` to a vetted address of its host (``Host`` and TLS keep the name)."""
        url = request.url
        host = url.host
        port = url.port or (443 if url.scheme == "https" else 80)
        extensions = dict(request.extensions)
        if url.scheme == "https":
            extensions["sni_hostname"] = host
        failure: httpx.ConnectError | None = None
        for address in self._addresses(host, port):
            request.url = url.copy_with(host=address)
            request.extensions = extensions
            try:
                return self._inner.handle_request(request)
            except httpx.ConnectError as exc:
                failure = exc  # another vetted address of the name may answer
            finally:
                request.url = url
        assert failure is not None
        raise failure

    def close(self) -> None:
        """Close the wrapped transport's connections."""
        self._inner.close()


def guarded_client(allowed_hosts: Iterable[str] = (), **options: Any) -> httpx.Client:
    """An ``httpx.Client`` over :class:`GuardedTransport` that follows no redirects."""
    options.setdefault("follow_redirects", False)
    return httpx.Client(transport=GuardedTransport(allowed_hosts), **options)


def require_https(url: str, what: str) -> None:
    """Refuse a plain-http ``url`` unless it names a loopback address (a local emulator or
    test server): tokens and secrets travel in its requests. ``what`` names it in the
    sentence ("The Gmail API URL")."""
    parsed = httpx.URL(url)
    if parsed.scheme == "https":
        return
    loopback = False
    if parsed.scheme == "http":
        try:
            loopback = ipaddress.ip_address(parsed.host).is_loopback
        except ValueError:
            loopback = parsed.host == "localhost"
    if not loopback:
        raise ConfigError(f"{what} {url!r} must use https.")
