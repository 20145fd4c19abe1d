"""The test servers and the store's connection check (tests/jmap/conftest.py, tests/conftest.py)."""

from __future__ import annotations

import gc
import socket
import sqlite3
import ssl
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from mailroom.store.engine import open_store
from tests.conftest import CheckoutLog
from tests.jmap.conftest import self_signed, serve


async def _hello(_request: Request) -> PlainTextResponse:
    return PlainTextResponse("hello")


def test_a_tls_client_that_stays_connected_leaves_no_socket_behind(tmp_path: Path) -> None:
    """The server stops while a TLS client neither reads nor closes: no socket of it is left open.

    (Left open, it would warn when collected — in whichever test that happens.)
    """
    cert, key = self_signed(tmp_path)
    serving = serve(Starlette(routes=[Route("/", _hello)]), cert, key)
    port = int(next(serving).rsplit(":", 1)[1])
    context = ssl.create_default_context(cafile=str(cert))
    with context.wrap_socket(
        socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1"
    ) as client:
        client.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer = b""
        while not answer.endswith(b"hello"):
            answer += client.recv(65536)
        next(serving, None)  # the server stops; the client is still connected
    gc.collect()  # a server socket still open would warn here, failing this test


def test_connections_never_given_back_are_named_and_closed(tmp_path: Path) -> None:
    """The store's check names where a connection still out was taken, and closes it."""
    store = open_store(f"sqlite:///{tmp_path / 'store.sqlite3'}", tmp_path)
    try:
        checkouts = CheckoutLog(store.engine)
        with store.session():
            pass
        assert checkouts.wait_until_all_in(0) == []
        kept = store.engine.connect()
        (where,) = checkouts.wait_until_all_in(0)
        assert "MainThread" in where and "tests/support_tests/test_serve.py" in where
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            kept.connection.dbapi_connection.execute("SELECT 1")  # type: ignore[union-attr]
        kept.invalidate()
        kept.close()
    finally:
        store.dispose()
