"""A small fault-injecting TCP proxy for tests (threads + blocking sockets).

Usage::

    with FaultyProxy(server.host, server.port) as proxy:
        client = IMAPClient(proxy.host, port=proxy.port, ssl=False)
        client.login(...)
        client.select_folder("INBOX")
        proxy.drop_after(500)          # cut the next 500 bytes into the FETCH response
        client.fetch([1], ["BODY[]"])  # -> IMAPClientAbortError / OSError

Every accepted client connection gets its own upstream connection and two pump threads
(client->server and server->client).  Faults:

* ``drop_after(n)``: once ``n`` more bytes have been forwarded server->client on a connection,
  forward exactly up to that byte and then close both sides (FIN, or RST with ``rst=True``).
  The budget is counted from the call for open connections and from the start for later ones,
  and stays armed until ``reset()``.
* ``drop_all()``: cut every open connection now.
* ``reset()``: back to a transparent proxy (open connections are left alone).

A pump blocked in ``recv()`` is woken with ``shutdown()``; closing a socket from another
thread would not wake it on Linux.  For an RST the sockets get ``SO_LINGER`` (on, 0 s) and
``shutdown(SHUT_RD)`` (which sends nothing) and are closed when both pumps have returned.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Self

__all__ = ["FaultyProxy"]

_CHUNK = 65536


class _Connection:
    """One proxied client connection and its upstream connection."""

    def __init__(self, proxy: FaultyProxy, client: socket.socket, server: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.lock = threading.Lock()
        self.server_to_client = 0
        self.client_to_server = 0
        self.limit: int | None = None  # drop once server_to_client reaches this
        self.rst = False
        self.cut = False
        self.dropped = False
        self._pumps_left = 2
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        for name, target in (("c2s", self._pump_c2s), ("s2c", self._pump_s2c)):
            thread = threading.Thread(
                target=self._run, args=(target,), name=f"FaultyProxy-{name}", daemon=True
            )
            self.threads.append(thread)
            thread.start()

    def _run(self, target: Callable[[], None]) -> None:
        try:
            target()
        except (OSError, ValueError):  # peer reset, socket shut down or closed under us
            pass
        finally:
            self._pump_done()

    def _pump_c2s(self) -> None:
        while True:
            data = self.client.recv(_CHUNK)
            if not data:
                self._half_close(self.server)
                return
            with self.lock:
                self.client_to_server += len(data)
            self.server.sendall(data)

    def _pump_s2c(self) -> None:
        while True:
            data = self.server.recv(_CHUNK)
            if not data:
                self._half_close(self.client)
                return
            # Count before sending: once the client has read the bytes, the counter (which
            # drop_after() arms from) must already include them.
            with self.lock:
                room = None if self.limit is None else max(self.limit - self.server_to_client, 0)
                send = data if room is None or len(data) < room else data[:room]
                self.server_to_client += len(send)
            if send:
                self.client.sendall(send)
            if room is not None and len(data) >= room:
                self.proxy._note_drop(self)
                self.cut_now(self.rst)
                return

    def _half_close(self, sock: socket.socket) -> None:
        # Forward an EOF: the other direction may still carry data (e.g. LOGOUT's reply).
        # After a cut there is nothing to forward (and a FIN would spoil an RST).
        if self.cut:
            return
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)

    def arm(self, n_bytes: int, rst: bool) -> None:
        with self.lock:
            self.limit = self.server_to_client + n_bytes
            self.rst = rst

    def disarm(self) -> None:
        with self.lock:
            self.limit = None

    def cut_now(self, rst: bool = False) -> None:
        """Close both sides: FIN (``shutdown``) or RST (linger 0, closed by the last pump)."""
        with self.lock:
            if self.cut:
                return
            self.cut = True
            self.rst = rst
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                if rst:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    sock.shutdown(socket.SHUT_RD)
                else:
                    sock.shutdown(socket.SHUT_RDWR)

    def force_shutdown(self) -> None:
        """Wake both pumps whatever state they are in (used when closing the proxy)."""
        with self.lock:
            self.cut = True
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _pump_done(self) -> None:
        with self.lock:
            self._pumps_left -= 1
            last = self._pumps_left == 0
        if last:
            self.client.close()
            self.server.close()
            self.proxy._forget(self)

    def join(self, timeout: float) -> None:
        for thread in self.threads:
            if thread is not threading.current_thread():
                thread.join(timeout)


class FaultyProxy:
    """A TCP proxy on 127.0.0.1 (free port) to ``target_host:target_port`` that can cut
    connections on purpose.  Starts listening at construction; use as a context manager or
    call ``close()``."""

    def __init__(
        self,
        target_host: str,
        target_port: int,
        *,
        listen_host: str = "127.0.0.1",
        connect_timeout: float = 5.0,
    ) -> None:
        self.target_host = target_host
        self.target_port = target_port
        self.connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._connections: set[_Connection] = set()
        self._drop_after: int | None = None
        self._drop_rst = False
        self._closed = threading.Event()
        self.dropped = threading.Event()
        self.connections_accepted = 0
        self.connections_dropped = 0
        self._bytes_s2c_closed = 0
        self._bytes_c2s_closed = 0

        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((listen_host, 0))
        self._listener.listen(64)
        # accept() is not woken by close() from another thread: poll with a short timeout.
        self._listener.settimeout(0.1)
        self.host: str = listen_host
        self.port: int = self._listener.getsockname()[1]
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name="FaultyProxy-accept", daemon=True
        )
        self._accept_thread.start()

    # ------------------------------------------------------------------ faults

    def drop_after(self, n_bytes_from_server: int, *, rst: bool = False) -> None:
        """Close both sides of a connection once ``n_bytes_from_server`` more bytes have
        gone server->client (exactly that many are delivered); stays armed until reset()."""
        if n_bytes_from_server < 0:
            raise ValueError("n_bytes_from_server must be >= 0")
        with self._lock:
            self._drop_after = n_bytes_from_server
            self._drop_rst = rst
            self.dropped.clear()
            connections = list(self._connections)
        for conn in connections:
            conn.arm(n_bytes_from_server, rst)
        if n_bytes_from_server == 0:
            for conn in connections:
                self._note_drop(conn)
                conn.cut_now(rst)

    def reset(self) -> None:
        """Remove all faults: the proxy forwards transparently again."""
        with self._lock:
            self._drop_after = None
            self._drop_rst = False
            connections = list(self._connections)
        for conn in connections:
            conn.disarm()

    def drop_all(self, *, rst: bool = False) -> None:
        """Cut every open connection now (FIN, or RST with ``rst=True``)."""
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            self._note_drop(conn)
            conn.cut_now(rst)

    # ------------------------------------------------------------------- stats

    @property
    def active_connections(self) -> int:
        with self._lock:
            return len(self._connections)

    @property
    def bytes_server_to_client(self) -> int:
        """Bytes forwarded server->client over the proxy's lifetime."""
        with self._lock:
            return self._bytes_s2c_closed + sum(c.server_to_client for c in self._connections)

    @property
    def bytes_client_to_server(self) -> int:
        """Bytes forwarded client->server over the proxy's lifetime."""
        with self._lock:
            return self._bytes_c2s_closed + sum(c.client_to_server for c in self._connections)

    # --------------------------------------------------------------- internals

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _addr = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection(
                    (self.target_host, self.target_port), timeout=self.connect_timeout
                )
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            client.settimeout(None)
            for sock in (client, server):
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn = _Connection(self, client, server)
            with self._lock:
                if self._closed.is_set():
                    client.close()
                    server.close()
                    return
                if self._drop_after is not None:
                    conn.limit = self._drop_after
                    conn.rst = self._drop_rst
                self._connections.add(conn)
                self.connections_accepted += 1
            conn.start()

    def _note_drop(self, conn: _Connection) -> None:
        with self._lock:
            if not conn.dropped:
                conn.dropped = True
                self.connections_dropped += 1
        self.dropped.set()

    def _forget(self, conn: _Connection) -> None:
        with self._lock:
            if conn in self._connections:
                self._connections.discard(conn)
                self._bytes_s2c_closed += conn.server_to_client
                self._bytes_c2s_closed += conn.client_to_server

    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting, cut all connections and wait for the threads to finish."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._accept_thread.join(timeout)
        self._listener.close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            conn.force_shutdown()
        for conn in connections:
            conn.join(timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<FaultyProxy {self.host}:{self.port} -> {self.target_host}:{self.target_port} "
            f"active={self.active_connections}>"
        )
