"""The SSRF-guarded HTTP transport against real servers on loopback, over http and https."""

from __future__ import annotations

import http.server
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mailroom.errors import ConfigError
from mailroom.providers.base import AuthError, TransientError
from mailroom.providers.guarded_http import GuardedTransport, guarded_client, require_https
from tests.jmap.conftest import self_signed


class _Echo(http.server.BaseHTTPRequestHandler):
    """Answers every GET with the Host header it received."""

    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        body = (self.headers.get("Host") or "").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


def _run(server: http.server.ThreadingHTTPServer) -> Iterator[int]:
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def plain_port() -> Iterator[int]:
    yield from _run(http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo))


@pytest.fixture
def tls(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    cert, key = self_signed(tmp_path, with_ip=False)  # valid for the name only
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    for port in _run(server):
        yield port, cert


def test_a_private_host_is_refused_unless_allow_listed(plain_port: int) -> None:
    with guarded_client() as client, pytest.raises(AuthError, match="localhost"):
        client.get(f"http://localhost:{plain_port}/")
    with guarded_client(["localhost"]) as client:
        answer = client.get(f"http://localhost:{plain_port}/")
    assert answer.status_code == 200 and answer.text == f"localhost:{plain_port}"


def test_a_name_that_does_not_resolve_is_transient() -> None:
    with guarded_client() as client, pytest.raises(TransientError):
        client.get("http://name-that-does-not-resolve.invalid/")


def test_tls_checks_the_certificate_for_the_name(tls: tuple[int, Path]) -> None:
    """The request goes to the vetted address but TLS and Host keep the name: the
    certificate names localhost only, not the address connected to."""
    port, cert = tls
    trusting = ssl.create_default_context(cafile=str(cert))
    inner = httpx.HTTPTransport(verify=trusting)
    with httpx.Client(transport=GuardedTransport(["localhost"], inner=inner)) as client:
        answer = client.get(f"https://localhost:{port}/")
    assert answer.status_code == 200 and answer.text == f"localhost:{port}"
    untrusted = httpx.Client(transport=GuardedTransport(["localhost"]))
    with untrusted, pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        untrusted.get(f"https://localhost:{port}/")


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:1/", "http://localhost/x", "http://[::1]:8/", "https://graph.example/"],
)
def test_plain_http_is_only_for_loopback(url: str) -> None:
    require_https(url, "The API URL")


@pytest.mark.parametrize("url", ["http://graph.example/", "http://10.0.0.1/", "ftp://x/"])
def test_plain_http_elsewhere_is_refused_in_one_sentence(url: str) -> None:
    with pytest.raises(ConfigError, match=r"^The API URL '.*' must use https\.$"):
        require_https(url, "The API URL")
