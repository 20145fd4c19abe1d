"""The Gmail IMAP emulator behaves as Gmail's IMAP documentation says (read with IMAPClient)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from imapclient import IMAPClient

from tests.emulators.gmail_imap import GmailImapServer
from tests.factories import make_message
from tests.imap.gmail.conftest import PASSWORD, USER


@pytest.fixture
def client(gmail: GmailImapServer) -> Iterator[IMAPClient]:
    """A plain IMAPClient logged in to the emulator."""
    with IMAPClient(gmail.host, port=gmail.port, ssl=False, timeout=10) as imap:
        imap.login(USER, PASSWORD)
        yield imap


def _msgids(client: IMAPClient, folder: str) -> set[int]:
    client.select_folder(folder, readonly=True)
    uids = client.search("ALL")
    return (
        {d[b"X-GM-MSGID"] for d in client.fetch(uids, ["X-GM-MSGID"]).values()} if uids else set()
    )


def test_capabilities_and_special_use_folders(gmail: GmailImapServer, client: IMAPClient) -> None:
    """X-GM-EXT-1 after login; All Mail is \\All, Spam \\Junk, Trash \\Trash."""
    assert b"X-GM-EXT-1" in client.capabilities()
    assert b"QRESYNC" not in client.capabilities()
    special = {name: set(flags) for flags, _d, name in client.list_folders()}
    assert b"\\All" in special["[Gmail]/All Mail"]
    assert b"\\Junk" in special["[Gmail]/Spam"] and b"\\Trash" in special["[Gmail]/Trash"]
    assert b"\\Noselect" in special["[Gmail]"]


def test_one_message_shows_in_all_mail_and_each_label_folder(
    gmail: GmailImapServer, client: IMAPClient
) -> None:
    """The same X-GM-MSGID in All Mail, INBOX and both label folders; labels listed."""
    msgid = gmail.model.add(make_message("m@x"), ("\\Inbox", "Work", "Muy Importante"))
    for folder in ("[Gmail]/All Mail", "INBOX", "Work", "Muy Importante"):
        assert _msgids(client, folder) == {msgid}, folder
    client.select_folder("[Gmail]/All Mail")
    (data,) = client.fetch("1", ["X-GM-LABELS", "X-GM-THRID"]).values()
    assert set(data[b"X-GM-LABELS"]) == {b"\\Inbox", b"Work", b"Muy Importante"}
    assert data[b"X-GM-THRID"] == msgid


def test_label_store_copy_move_and_expunge_mean_what_they_mean_at_gmail(
    gmail: GmailImapServer, client: IMAPClient
) -> None:
    """+X-GM-LABELS fills a label folder; MOVE out of INBOX archives; All Mail expunge trashes."""
    msgid = gmail.model.add(make_message("m@x"), ("\\Inbox",))
    client.select_folder("[Gmail]/All Mail")
    client.add_gmail_labels([1], ["Later"], silent=True)
    assert _msgids(client, "Later") == {msgid}
    client.create_folder("Work")
    client.select_folder("INBOX")
    client.move([1], "Work")
    assert gmail.model.message(msgid).labels == {"Later", "Work"}
    assert client.search(["X-GM-RAW", "label:Work"]) == []  # INBOX no longer holds it
    client.select_folder("[Gmail]/All Mail")
    (uid,) = client.search(["X-GM-MSGID", msgid])
    client.remove_gmail_labels([uid], ["Later"], silent=True)
    client.delete_messages([uid])
    client.expunge()
    message = gmail.model.message(msgid)
    assert message.place == "trash" and message.labels == {"Work"}
    assert _msgids(client, "[Gmail]/Trash") == {msgid}
    assert _msgids(client, "[Gmail]/All Mail") == set()


def test_changedsince_reports_label_changes(gmail: GmailImapServer, client: IMAPClient) -> None:
    """A label change raises the message's MODSEQ, as CONDSTORE clients need."""
    first = gmail.model.add(make_message("a@x"), ("\\Inbox",))
    gmail.model.add(make_message("b@x"), ("\\Inbox",))
    client.enable("CONDSTORE")
    status = client.select_folder("[Gmail]/All Mail", readonly=True)
    since = status[b"HIGHESTMODSEQ"]
    gmail.model.relabel(first, add=["Work"])
    changed = client.fetch([1, 2], ["X-GM-MSGID"], modifiers=[f"CHANGEDSINCE {since}"])
    assert [d[b"X-GM-MSGID"] for d in changed.values()] == [first]
