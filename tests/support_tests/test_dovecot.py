"""Tests for the private Dovecot test server in tests/support/dovecot.py."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from imapclient import IMAPClient
from imapclient.exceptions import LoginError

# The repository root must be importable as "tests.support" whatever pytest's rootdir setup.
from tests.support.dovecot import (
    SPECIAL_USE_MAILBOXES,
    DovecotServer,
    DovecotUnavailableError,
    find_dovecot,
)

PASSWORD = "s3cret-pw"

MESSAGE = (
    b"From: Alice <alice@example.org>\r\n"
    b"To: Bob <bob@example.org>\r\n"
    b"Subject: support test\r\n"
    b"Message-ID: <support-test-1@example.org>\r\n"
    b"Date: Sun, 01 Mar 2026 10:00:00 +0000\r\n"
    b"\r\n"
    b"Hello from the dovecot support tests.\r\n"
)


def _require_dovecot() -> None:
    if find_dovecot() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("dovecot is not installed; scripts/test-services.sh installs it")
        pytest.skip("dovecot is not installed (apt-get install dovecot-imapd)")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DovecotServer]:
    """One Dovecot for the module, with user alice."""
    _require_dovecot()
    try:
        dovecot = DovecotServer(tmp_path_factory.mktemp("dovecot"))
    except DovecotUnavailableError as exc:  # pragma: no cover - depends on the machine
        pytest.skip(str(exc))
    with dovecot:
        dovecot.add_user("alice", PASSWORD)
        yield dovecot


@contextmanager
def imap(
    server: DovecotServer, user: str = "alice", password: str = PASSWORD
) -> Iterator[IMAPClient]:
    client = IMAPClient(server.host, port=server.port, ssl=False, timeout=10)
    try:
        client.login(user, password)
        yield client
    finally:
        try:
            client.logout()
        except Exception:
            client.shutdown()


def test_capabilities_after_login(server: DovecotServer) -> None:
    """After LOGIN the server advertises CONDSTORE, QRESYNC, MOVE, IDLE and SPECIAL-USE."""
    with imap(server) as client:
        capabilities = set(client.capabilities())
    for wanted in (b"CONDSTORE", b"QRESYNC", b"MOVE", b"IDLE", b"SPECIAL-USE"):
        assert wanted in capabilities


def test_special_use_folders_are_listed(server: DovecotServer) -> None:
    """LIST shows INBOX and Sent/Drafts/Trash/Junk/Archive with their special-use flags."""
    with imap(server) as client:
        folders = {name: set(flags) for flags, _delimiter, name in client.list_folders()}
        subscribed = {name for _flags, _delimiter, name in client.list_sub_folders()}
    assert "INBOX" in folders
    for name, flag in SPECIAL_USE_MAILBOXES.items():
        assert flag.encode() in folders[name]
        assert name in subscribed


def test_append_then_fetch_round_trips_bytes(server: DovecotServer) -> None:
    """An APPENDed message is fetched back byte for byte and lands in the user's Maildir."""
    with imap(server) as client:
        client.append("INBOX", MESSAGE, flags=[b"\\Seen"])
        client.select_folder("INBOX")
        uids = client.search(["HEADER", "Message-ID", "<support-test-1@example.org>"])
        assert len(uids) == 1
        fetched = client.fetch(uids, [b"BODY.PEEK[]", b"FLAGS"])[uids[0]]
    assert fetched[b"BODY[]"] == MESSAGE
    assert b"\\Seen" in fetched[b"FLAGS"]
    # Dovecot's maildir stores bare LF line ends and adds the CRs back when serving IMAP.
    stored = [p.read_bytes() for p in (server.maildir("alice") / "cur").iterdir()]
    assert MESSAGE.replace(b"\r\n", b"\n") in stored


def test_enable_qresync_reports_highestmodseq(server: DovecotServer) -> None:
    """ENABLE QRESYNC succeeds and SELECT then reports HIGHESTMODSEQ."""
    with imap(server) as client:
        enabled = client.enable("QRESYNC")
        info = client.select_folder("INBOX")
    assert b"QRESYNC" in enabled
    assert int(info[b"HIGHESTMODSEQ"]) >= 1


def test_move_to_archive(server: DovecotServer) -> None:
    """MOVE takes a message out of INBOX into the \\Archive folder."""
    with imap(server) as client:
        client.append("INBOX", MESSAGE.replace(b"support-test-1", b"support-move-1"))
        client.select_folder("INBOX")
        uids = client.search(["HEADER", "Message-ID", "<support-move-1@example.org>"])
        client.move(uids, "Archive")
        assert client.search(["HEADER", "Message-ID", "<support-move-1@example.org>"]) == []
        client.select_folder("Archive", readonly=True)
        moved = client.search(["HEADER", "Message-ID", "<support-move-1@example.org>"])
    assert len(moved) == 1


def test_add_user_after_start(server: DovecotServer) -> None:
    """A user added while the server runs can log in at once; a wrong password is refused."""
    server.add_user("carol", "carol-pw")
    with imap(server, "carol", "carol-pw") as client:
        assert client.select_folder("INBOX")[b"EXISTS"] == 0
    client = IMAPClient(server.host, port=server.port, ssl=False, timeout=10)
    try:
        with pytest.raises(LoginError):
            client.login("carol", "not-the-password")
    finally:
        client.shutdown()


def test_deliver_behind_dovecots_back(server: DovecotServer) -> None:
    """deliver() drops a message into a Maildir++ folder that IMAP then shows with its flags."""
    server.add_user("dave", "dave-pw")
    path = server.deliver("dave", MESSAGE, folder="Junk", flags="S")
    assert path.parent == server.maildir("dave") / ".Junk" / "cur"
    server.deliver("dave", MESSAGE)
    with imap(server, "dave", "dave-pw") as client:
        assert client.select_folder("INBOX")[b"EXISTS"] == 1
        client.select_folder("Junk")
        fetched = client.fetch(client.search(["ALL"]), [b"FLAGS", b"BODY.PEEK[]"])
    assert [data[b"BODY[]"] for data in fetched.values()] == [MESSAGE]
    assert all(b"\\Seen" in data[b"FLAGS"] for data in fetched.values())


def test_idle_sees_new_message(server: DovecotServer) -> None:
    """A client in IDLE is told about a message APPENDed by another connection."""
    server.add_user("erin", "erin-pw")
    with imap(server, "erin", "erin-pw") as watcher, imap(server, "erin", "erin-pw") as writer:
        watcher.select_folder("INBOX")
        watcher.idle()
        try:
            writer.append("INBOX", MESSAGE)
            deadline = time.monotonic() + 10
            responses: list[tuple[int | bytes, ...]] = []
            while time.monotonic() < deadline and not any(b"EXISTS" in r for r in responses):
                responses.extend(watcher.idle_check(timeout=1))
        finally:
            watcher.idle_done()
    assert (1, b"EXISTS") in responses


def test_stop_leaves_no_processes_and_restart_keeps_mail(tmp_path: Path) -> None:
    """stop() ends every Dovecot process even with a session open; start() again keeps mail."""
    _require_dovecot()
    with DovecotServer(tmp_path) as dovecot:
        dovecot.add_user("frank", "frank-pw")
        client = IMAPClient(dovecot.host, port=dovecot.port, ssl=False, timeout=10)
        try:
            client.login("frank", "frank-pw")
            client.append("INBOX", MESSAGE)
            assert len(dovecot.processes()) >= 4  # master, log, config, anvil, auth, imap...
            old_port = dovecot.port
            dovecot.stop()
            assert dovecot.processes() == []
            assert not dovecot.running
        finally:
            client.shutdown()
        with pytest.raises(OSError), socket.create_connection(("127.0.0.1", old_port), 1):
            pass
        dovecot.start()
        with imap(dovecot, "frank", "frank-pw") as again:
            assert again.select_folder("INBOX")[b"EXISTS"] == 1
        home = dovecot.home
    assert not home.exists()
    assert (tmp_path / "dovecot.log").exists()
