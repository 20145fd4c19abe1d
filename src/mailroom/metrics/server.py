"""The small ``/metrics`` endpoint of ``mailroom worker`` and ``mailroom supervisor``.

Those processes serve no HTTP otherwise, so ``--metrics-listen HOST:PORT`` (or
``MAILROOM_METRICS_LISTEN``) opens one: a threaded WSGI server from the
standard library in a daemon thread, answering the process's own metrics
(prometheus-client's WSGI app) behind the same gate as ``mailroom serve``
(:mod:`.access`). The store's view is left to ``mailroom serve``.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, make_wsgi_app

from mailroom.errors import ConfigError
from mailroom.metrics.access import ScrapeAccess

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def parse_metrics_listen(text: str) -> tuple[str, int] | None:
    """``HOST:PORT`` (``[v6]:PORT``) as a pair; None for empty or ``off``; else ConfigError."""
    value = text.strip()
    if value.lower() in ("", "off"):
        return None
    host, sep, port = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:  # 0: any free
        raise ConfigError(
            f"The metrics address {text!r} is not HOST:PORT; give one such as 127.0.0.1:9101."
        )
    return host, int(port)


def gated(app: WsgiApp, access: ScrapeAccess) -> WsgiApp:
    """``app`` for the scrapers ``access`` admits; 403 for anyone else."""

    def guarded(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if access.permits(environ.get("REMOTE_ADDR"), environ.get("HTTP_AUTHORIZATION")):
            return app(environ, start_response)
        start_response("403 Forbidden", [("Content-Type", "text/plain")])
        return [b"Forbidden"]

    return guarded


class _Quiet(WSGIRequestHandler):
    """No line on stderr per scrape."""

    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged."""


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class MetricsServer:
    """The endpoint, started in a daemon thread; ``stop()`` closes it."""

    def __init__(self, host: str, port: int, access: ScrapeAccess) -> None:
        server_class = type(
            "_Bound",
            (_Server,),
            {"address_family": socket.AF_INET6 if ":" in host else socket.AF_INET},
        )
        try:
            self._server: WSGIServer = make_server(
                host, port, gated(make_wsgi_app(REGISTRY), access), server_class, _Quiet
            )
        except OSError as exc:
            raise ConfigError(
                f"The metrics endpoint cannot listen on {host}:{port} ({exc.strerror or exc})."
            ) from None
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop answering and close the socket."""
        self._server.shutdown()
        self._server.server_close()
