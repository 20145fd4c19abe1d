"""Opening and closing the submission port: where it listens, idle clients, a graceful stop."""

from __future__ import annotations

import smtplib
import socket
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.jmap.auth import Authenticator
from mailroom.outbound.submission_port import SubmissionPort, parse_listen
from mailroom.store.engine import Store
from tests.outbound.port_support import Clock, add_people, mail, make_port, submissions


def test_listen_settings_are_host_port_or_off() -> None:
    """HOST:PORT and [v6]:PORT parse; off closes; anything else is one sentence."""
    assert parse_listen("127.0.0.1:8587") == ("127.0.0.1", 8587)
    assert parse_listen("[::1]:2525") == ("::1", 2525)
    assert parse_listen(" off ") is None and parse_listen("") is None
    for bad in ("8587", "host:", "host:99999", "host:port"):
        with pytest.raises(ConfigError, match="is not HOST:PORT"):
            parse_listen(bad)


def test_a_port_in_use_is_one_sentence(store: Store) -> None:
    """Binding a taken port fails with what to do, not an OSError."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        number = taken.getsockname()[1]
        port = SubmissionPort(store, Settings(data_dir=Path("/nonexistent")), port=number)
        with pytest.raises(ConfigError, match="cannot listen on 127.0.0.1:.*--no-submission-port"):
            port.start()
        port.stop()  # never started: nothing to do


def test_stop_says_421_to_idle_clients_and_idle_ones_are_dropped(store: Store) -> None:
    """A client that says nothing is closed after the timeout; stop tells the others 421."""
    add_people(store)
    with make_port(store, Clock(), None, timeout=1) as port:
        with socket.create_connection(port.address, timeout=60) as silent:
            assert silent.recv(100).startswith(b"220 ")
            assert silent.recv(100) == b""  # closed by the port, not by this test's timeout
        port.timeout = 600
        waiting = socket.create_connection(port.address, timeout=60)
        assert waiting.recv(100).startswith(b"220 ")
    with waiting:  # the port is stopped now
        said = b""
        while chunk := waiting.recv(100):
            said += chunk
    assert said.startswith(b"421 4.3.2 mailroom is shutting down")


def test_stop_lets_a_message_being_queued_finish(store: Store) -> None:
    """stop() waits for the message in hand: the client still gets its 250 and it is queued."""
    add_people(store)
    entered, release = threading.Event(), threading.Event()

    def slow_clock() -> datetime:  # the port reads the clock while it queues the message
        entered.set()
        assert release.wait(60)
        return datetime(2024, 5, 1, tzinfo=UTC)

    port = SubmissionPort(
        store,
        Settings(data_dir=Path("/nonexistent")),
        port=0,
        auth=Authenticator(store),
        clock=slow_clock,
        grace=60,
    ).start()
    replies: list[tuple[int, bytes]] = []

    def submit() -> None:
        smtp = smtplib.SMTP(*port.address, timeout=60)
        try:
            smtp.login("me", "pw")
            smtp.mail("me@example.org")
            smtp.rcpt("bob@example.net")
            replies.append(smtp.data(mail()))
        finally:
            smtp.close()  # no QUIT: the stopping port says 421 to what comes next

    sender = threading.Thread(target=submit)
    sender.start()
    assert entered.wait(60)
    stopper = threading.Thread(target=port.stop)
    stopper.start()
    stopper.join(0.5)
    assert stopper.is_alive()  # waiting for the message in hand
    release.set()
    stopper.join(60)
    sender.join(60)
    assert not stopper.is_alive() and not sender.is_alive()
    assert replies and replies[0][0] == 250
    assert len(submissions(store)) == 1
