"""httpx through the SSRF guard: every host is vetted once and then pinned.

:class:`GuardedTransport` wraps httpx's own transport. The first request to a
host resolves it through :func:`mailroom.providers.netguard.check_host` (public
addresses only, unless the operator allow-lists the host in
``MAILROOM_ALLOWED_PRIVATE_HOSTS``); that request and every later one to the host
then go to the vetted address, with the name kept for ``Host`` and TLS (SNI and
certificate checks), so a second DNS answer cannot point the client elsewhere.
A refused host raises the guard's AuthError, an unresolvable one its
TransientError, both with the guard's one sentence.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import httpx

from mailroom.providers import netguard

__all__ = ["GuardedTransport"]


class GuardedTransport(httpx.BaseTransport):
    """An httpx transport that connects only to hosts the SSRF guard allows."""

    def __init__(
        self, allowed: Iterable[str] = (), inner: httpx.BaseTransport | None = None
    ) -> None:
        self._allowed = tuple(allowed)
        self._inner = inner or httpx.HTTPTransport()
        self._pinned: dict[tuple[str, int], str] = {}
        self._lock = threading.Lock()

    def _address(self, host: str, port: int) -> str:
        with self._lock:
            pinned = self._pinned.get((host, port))
        if pinned is None:
            pinned = netguard.check_host(host, port, self._allowed)[0]
            with self._lock:
                self._pinned.setdefault((host, port), pinned)
        return pinned

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Send the request to the vetted address of its host."""
        host = request.url.host
        port = request.url.port or (443 if request.url.scheme == "https" else 80)
        request.url = request.url.copy_with(host=self._address(host, port))
        if request.url.scheme == "https":
            request.extensions = {**request.extensions, "sni_hostname": host}
        return self._inner.handle_request(request)

    def close(self) -> None:
        """Close the wrapped transport's connections."""
        self._inner.close()
