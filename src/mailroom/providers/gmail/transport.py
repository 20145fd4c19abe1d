"""An httpx transport whose every connection passes the SSRF guard.

Each new TCP connection resolves its host through
:func:`mailroom.providers.netguard.check_host` (public addresses only, unless
the operator allow-lists the host in ``MAILROOM_ALLOWED_PRIVATE_HOSTS``) and
connects to a vetted address, so a second DNS answer cannot slip past the
check. The URL keeps the host name, so TLS verifies the certificate for the
name and ``Host`` is right; only the address is pinned. Connections are
pooled and kept alive as with any httpx client.

A refused host is the guard's :class:`AuthError` (a name that does not resolve
its :class:`TransientError`), raised from the request.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from mailroom.providers.netguard import check_host

__all__ = ["guarded_transport"]


class _GuardedBackend(httpcore.NetworkBackend):
    """httpcore's socket backend, connecting only to addresses the guard vetted."""

    def __init__(self, allowed_hosts: Iterable[str]) -> None:
        self._allowed = tuple(allowed_hosts)
        self._sockets = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        last: httpcore.ConnectError | None = None
        for address in check_host(host, port, self._allowed):
            try:
                return self._sockets.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except httpcore.ConnectError as exc:
                last = exc  # another vetted address of the name may answer
        assert last is not None
        raise last

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not used for provider APIs")

    def sleep(self, seconds: float) -> None:
        self._sockets.sleep(seconds)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    # Loading the CA store takes a noticeable time; a context is safe to share.
    return httpx.create_ssl_context()


def guarded_transport(allowed_hosts: Iterable[str] = ()) -> httpx.HTTPTransport:
    """An ``httpx.HTTPTransport`` whose connections go through the SSRF guard."""
    context = _tls_context()
    transport = httpx.HTTPTransport(verify=context)
    # httpx has no public hook for the network backend; its pool is the one place to set
    # it. tests/providers/gmail/test_api.py proves the guard runs (a refused loopback host).
    transport._pool = httpcore.ConnectionPool(
        ssl_context=context,
        network_backend=_GuardedBackend(allowed_hosts),
    )
    return transport
