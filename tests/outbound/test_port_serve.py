"""``mailroom serve`` opens the submission port (or not), and closes it on Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import signal
import smtplib
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mailroom.outbound.submission_port import DEFAULT_LISTEN, parse_listen
from mailroom.store.engine import open_store
from tests.jmap.conftest import free_port, self_signed
from tests.outbound.port_support import add_people, mail, submissions


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data dir whose SQLite store holds me and eve."""
    folder = tmp_path / "data"
    store = open_store(f"sqlite:///{folder / 'mailroom.sqlite3'}", folder)
    add_people(store)
    store.dispose()
    return folder


def _serve(data: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mailroom", "serve", "--no-jobs", *args],
        env={**os.environ, "MAILROOM_DATA_DIR": str(data)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@contextlib.contextmanager
def serving(data: Path, *args: str) -> Iterator[tuple[int, list[str]]]:
    """``mailroom serve ARGS`` until HTTP answers, then Ctrl-C; yields (port, [out, err])."""
    http = free_port()
    server = _serve(data, "--port", str(http), *args)
    said: list[str] = []
    try:
        for _ in range(600):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", http)) == 0:
                    break
            assert server.poll() is None, server.communicate()
            time.sleep(0.1)
        yield http, said
    finally:
        server.send_signal(signal.SIGINT)
        said.extend(server.communicate(timeout=60))
    # uvicorn re-raises the Ctrl-C after its shutdown: "interrupted", 130, as before the port.
    assert server.returncode == 130 and "Traceback" not in said[1], said
    assert "WARNING" not in said[1], said


def test_serve_opens_the_port_with_its_certificate_and_closes_it(
    data: Path, tmp_path: Path
) -> None:
    """--submission-port with --tls-cert: smtplib does STARTTLS, AUTH and queues; Ctrl-C closes."""
    cert, key = self_signed(tmp_path)
    number = free_port()
    listen = ("--submission-port", f"127.0.0.1:{number}")
    tls = ("--tls-cert", str(cert), "--tls-key", str(key))
    with (
        serving(data, *listen, *tls) as (_, said),
        smtplib.SMTP("127.0.0.1", number, timeout=30) as smtp,
    ):
        smtp.starttls(context=ssl.create_default_context(cafile=str(cert)))
        smtp.login("me", "pw")
        smtp.sendmail("me@example.org", ["bob@example.net"], mail())
    assert f"Mail programs send through 127.0.0.1:{number} (SMTP submission, STARTTLS" in said[0]
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", number)) != 0  # closed with serve
    store = open_store(f"sqlite:///{data / 'mailroom.sqlite3'}", data, migrate=False)
    try:
        assert len(submissions(store)) == 1
    finally:
        store.dispose()


def test_no_submission_port_and_a_taken_one(data: Path) -> None:
    """--no-submission-port opens none; a taken port given by hand stops serve in one sentence."""
    with serving(data, "--no-submission-port") as (_, said):
        pass
    assert "Mail programs" not in said[0]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        number = taken.getsockname()[1]
        refused = _serve(
            data, "--port", str(free_port()), "--submission-port", f"127.0.0.1:{number}"
        )
        out, err = refused.communicate(timeout=60)
    assert refused.returncode == 1 and "Traceback" not in err
    assert err.startswith("mailroom: The submission port cannot listen on 127.0.0.1:")
    both = _serve(data, "--submission-port", "127.0.0.1:1", "--no-submission-port")
    assert "not both" in both.communicate(timeout=60)[1] and both.returncode == 1


def test_a_taken_default_port_leaves_http_served_with_a_warning(data: Path) -> None:
    """Something else on 127.0.0.1:8587: serve warns and serves HTTP without the port."""
    host, number = parse_listen(DEFAULT_LISTEN) or ("", 0)
    with socket.socket() as holder:
        with contextlib.suppress(OSError):  # already taken by someone else: just as good
            holder.bind((host, number))
            holder.listen()
        with serving(data) as (_, said):
            pass
    assert "Mail programs" not in said[0]
    assert f"cannot listen on {DEFAULT_LISTEN}" in said[1] and "serves without it" in said[1]
