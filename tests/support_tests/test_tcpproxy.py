"""Tests for the fault-injecting TCP proxy in tests/support/tcpproxy.py."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator

import pytest
from imapclient import IMAPClient
from imapclient.exceptions import IMAPClientAbortError

from tests.support.dovecot import DovecotServer, find_dovecot
from tests.support.tcpproxy import FaultyProxy

PAYLOAD = bytes(range(256)) * 400  # 102,400 bytes


class GreetingEchoServer:
    """Sends PAYLOAD to every new connection, then echoes what it receives."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.port: int = self.listener.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accept = threading.Thread(target=self._accept_loop, daemon=True)
        self._accept.start()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            conn.settimeout(10)
            conn.sendall(PAYLOAD)
            while data := conn.recv(65536):
                conn.sendall(data)

    def close(self) -> None:
        self._stop.set()
        self._accept.join(5)
        self.listener.close()
        for thread in self._threads:
            thread.join(5)


@pytest.fixture
def echo() -> Iterator[GreetingEchoServer]:
    """A local greeting+echo server."""
    server = GreetingEchoServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def proxy(echo: GreetingEchoServer) -> Iterator[FaultyProxy]:
    """A FaultyProxy in front of the echo server."""
    with FaultyProxy("127.0.0.1", echo.port) as faulty:
        yield faulty


def _read_until_eof(sock: socket.socket, limit: int = 10_000_000) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while total < limit:
        data = sock.recv(65536)
        if not data:
            break
        chunks.append(data)
        total += len(data)
    return b"".join(chunks)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while total < n:
        data = sock.recv(n - total)
        if not data:
            break
        chunks.append(data)
        total += len(data)
    return b"".join(chunks)


def test_passthrough_forwards_both_directions(proxy: FaultyProxy) -> None:
    """Without faults the proxy forwards the greeting and echoes data unchanged."""
    with socket.create_connection((proxy.host, proxy.port), timeout=10) as sock:
        assert _read_exactly(sock, len(PAYLOAD)) == PAYLOAD
        sock.sendall(b"ping\r\n")
        assert _read_exactly(sock, 6) == b"ping\r\n"
        sock.shutdown(socket.SHUT_WR)
        assert _read_until_eof(sock) == b""
    assert proxy.bytes_client_to_server == 6


def test_drop_after_delivers_exactly_n_bytes_then_eof(proxy: FaultyProxy) -> None:
    """drop_after(n) lets exactly n server bytes through and then closes the connection."""
    proxy.drop_after(12_345)
    with socket.create_connection((proxy.host, proxy.port), timeout=10) as sock:
        received = _read_until_eof(sock)
    assert received == PAYLOAD[:12_345]
    assert proxy.dropped.wait(5)
    assert proxy.connections_dropped == 1


def test_drop_after_counts_from_the_call_on_open_connections(proxy: FaultyProxy) -> None:
    """On an open connection the byte budget starts when drop_after() is called."""
    with socket.create_connection((proxy.host, proxy.port), timeout=10) as sock:
        assert _read_exactly(sock, len(PAYLOAD)) == PAYLOAD
        proxy.drop_after(3)
        sock.sendall(b"hello")
        assert _read_until_eof(sock) == b"hel"


def test_drop_after_with_rst_resets_the_client(proxy: FaultyProxy) -> None:
    """With rst=True the client sees a connection reset instead of a clean EOF."""
    proxy.drop_after(1000, rst=True)
    with (
        socket.create_connection((proxy.host, proxy.port), timeout=10) as sock,
        pytest.raises(ConnectionResetError),
    ):
        _read_until_eof(sock)


def test_reset_restores_passthrough(proxy: FaultyProxy) -> None:
    """After reset() new connections are forwarded in full again."""
    proxy.drop_after(10)
    with socket.create_connection((proxy.host, proxy.port), timeout=10) as sock:
        assert _read_until_eof(sock) == PAYLOAD[:10]
    proxy.reset()
    with socket.create_connection((proxy.host, proxy.port), timeout=10) as sock:
        assert _read_exactly(sock, len(PAYLOAD)) == PAYLOAD


def test_drop_all_cuts_idle_connections(proxy: FaultyProxy) -> None:
    """drop_all() closes a connection that is waiting for data."""
    with socket.create_connection((proxy.host, proxy.port), timeout=10) as sock:
        assert _read_exactly(sock, len(PAYLOAD)) == PAYLOAD
        proxy.drop_all()
        assert _read_until_eof(sock) == b""
    assert proxy.connections_dropped == 1


@pytest.fixture(scope="module")
def dovecot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DovecotServer]:
    """A private Dovecot with user alice and one large message in INBOX."""
    if find_dovecot() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("dovecot is not installed; scripts/test-services.sh installs it")
        pytest.skip("dovecot is not installed (apt-get install dovecot-imapd)")
    with DovecotServer(tmp_path_factory.mktemp("proxy-dovecot")) as server:
        server.add_user("alice", "alice-pw")
        body = b"".join(b"line %06d of a long message body\r\n" % i for i in range(8000))
        server.deliver(
            "alice",
            b"Subject: big\r\nMessage-ID: <big@example.org>\r\n\r\n" + body,
            flags="S",
        )
        yield server


def test_drop_cuts_a_fetch_midway(dovecot: DovecotServer) -> None:
    """A connection dropped mid-FETCH aborts the client after exactly the allowed bytes."""
    with FaultyProxy(dovecot.host, dovecot.port) as proxy:
        client = IMAPClient(proxy.host, port=proxy.port, ssl=False, timeout=10)
        try:
            client.login("alice", "alice-pw")
            assert client.select_folder("INBOX")[b"EXISTS"] == 1
            before = proxy.bytes_server_to_client
            proxy.drop_after(4096)
            with pytest.raises((IMAPClientAbortError, OSError)):
                client.fetch([1], [b"BODY.PEEK[]"])
            assert proxy.dropped.wait(5)
            assert proxy.bytes_server_to_client - before == 4096
        finally:
            client.shutdown()

        proxy.reset()
        again = IMAPClient(proxy.host, port=proxy.port, ssl=False, timeout=10)
        try:
            again.login("alice", "alice-pw")
            again.select_folder("INBOX", readonly=True)
            body = again.fetch([1], [b"BODY.PEEK[]"])[1][b"BODY[]"]
            assert len(body) > 200_000
        finally:
            again.logout()
