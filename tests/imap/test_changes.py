"""Changes other clients make — flags, moves, copies, deletes, renames, resets — seen by sync."""

from __future__ import annotations

import pytest
from imapclient import IMAPClient
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.providers.imap import sync_account
from mailroom.reading import list_messages
from mailroom.store.engine import Store
from mailroom.store.models import Folder, Label
from tests.factories import make_message
from tests.imap.conftest import add_account, new_mailbox
from tests.imap.views import (
    Mailbox,
    assert_mirrors,
    message_ids,
    store_view,
    sync_all,
)
from tests.support.dovecot import DovecotServer
from tests.support.tcpproxy import FaultyProxy


def _labels(store: Store) -> dict[str, list[str]]:
    with store.session() as session:
        return {r["message_id"]: r["labels"] for r in list_messages(session, 1)}


def _seed(other: IMAPClient, count: int = 4, folder: str = "INBOX") -> None:
    for i in range(count):
        other.append(folder, make_message(f"{folder.lower()}-{i}@x", subject=f"{folder} {i}"))


def test_flags_set_elsewhere_are_mirrored(
    store: Store, settings: Settings, mailbox: Mailbox, account: int, other: IMAPClient
) -> None:
    """\\Seen and \\Flagged set or cleared by another client reach seen_at and Starred."""
    _seed(other)
    sync_all(store, account, settings)
    other.select_folder("INBOX")
    other.add_flags([1, 2], [b"\\Seen"])
    other.add_flags([2, 3], [b"\\Flagged"])
    sync_account(store, account, settings=settings)
    assert_mirrors(store, account, mailbox)
    assert _labels(store)["inbox-1@x"] == ["Inbox", "Starred"]
    other.remove_flags([2], [b"\\Seen", b"\\Flagged"])
    sync_account(store, account, settings=settings)
    assert_mirrors(store, account, mailbox)
    assert _labels(store)["inbox-1@x"] == ["Inbox"]


def test_a_moved_message_stays_one_message(
    store: Store, settings: Settings, mailbox: Mailbox, account: int, other: IMAPClient
) -> None:
    """A message moved to another folder keeps its id and changes location and label."""
    _seed(other)
    sync_all(store, account, settings)
    before = message_ids(store, account)
    other.select_folder("INBOX")
    other.move([1], "Archive")
    other.move([2], "Trash")
    sync_account(store, account, settings=settings)
    assert message_ids(store, account) == before
    assert _labels(store)["inbox-0@x"] == ["Archive"]
    assert _labels(store)["inbox-1@x"] == ["Trash"]
    assert_mirrors(store, account, mailbox)


def test_a_message_deleted_elsewhere_is_deleted(
    store: Store, settings: Settings, mailbox: Mailbox, account: int, other: IMAPClient
) -> None:
    """A message expunged by another client is deleted from the store; the others stay."""
    _seed(other)
    sync_all(store, account, settings)
    other.select_folder("INBOX")
    other.delete_messages([3])
    other.expunge()
    sync_account(store, account, settings=settings)
    assert "inbox-2@x" not in message_ids(store, account)
    assert len(message_ids(store, account)) == 3
    assert_mirrors(store, account, mailbox)


def test_a_copy_is_one_message_in_two_places(
    store: Store, settings: Settings, mailbox: Mailbox, account: int, other: IMAPClient
) -> None:
    """COPY to another folder adds a location and a label; expunging one copy keeps the other."""
    other.create_folder("Receipts")
    _seed(other, 2)
    sync_all(store, account, settings)
    other.select_folder("INBOX")
    other.copy([1], "Receipts")
    sync_account(store, account, settings=settings)
    assert _labels(store)["inbox-0@x"] == ["Inbox", "Receipts"]
    assert len(store_view(store, account).places()["inbox-0@x"]) == 2
    assert_mirrors(store, account, mailbox)
    other.delete_messages([1])
    other.expunge()
    sync_account(store, account, settings=settings)
    assert _labels(store)["inbox-0@x"] == ["Receipts"]
    assert_mirrors(store, account, mailbox)


def test_same_message_id_different_content_is_two_messages(
    store: Store, settings: Settings, mailbox: Mailbox, account: int, other: IMAPClient
) -> None:
    """Two messages sharing a Message-ID but not their bytes are both kept."""
    other.append("INBOX", make_message("dup@x", body="First version.\n"))
    other.append("Sent", make_message("dup@x", body="A longer second version.\n"))
    sync_all(store, account, settings)
    with store.session() as session:
        rows = [r for r in list_messages(session, 1) if r["message_id"] == "dup@x"]
    assert sorted(r["labels"][0] for r in rows) == ["Inbox", "Sent"]


def test_folders_created_renamed_and_deleted_elsewhere(
    store: Store, settings: Settings, mailbox: Mailbox, account: int, other: IMAPClient
) -> None:
    """A new folder gets a label; a renamed one keeps its messages; a deleted one takes its mail."""
    other.create_folder("Projects")
    other.create_folder("Old")
    other.create_folder("Snoozed")  # a folder may not take over the folderless Snoozed label
    _seed(other, 2, "Projects")
    _seed(other, 1, "Old")
    sync_all(store, account, settings)
    ids = message_ids(store, account)
    other.rename_folder("Projects", "Clients")
    other.delete_folder("Old")
    sync_account(store, account, settings=settings)
    assert message_ids(store, account) == {k: v for k, v in ids.items() if k != "old-0@x"}
    assert _labels(store)["projects-0@x"] == ["Clients"]
    with store.session() as session:
        paths = set(session.scalars(select(Label.path)))
        folders = set(session.scalars(select(Folder.path).where(Folder.account_id == account)))
    assert "Projects" not in paths and "Old" not in paths
    assert "Snoozed (IMAP)" in paths
    assert {"Clients", "INBOX"} <= folders and not {"Projects", "Old"} & folders
    assert_mirrors(store, account, mailbox)


def test_uidvalidity_reset_remaps_without_downloading(
    store: Store, settings: Settings, dovecot: DovecotServer
) -> None:
    """A recreated folder (new UIDVALIDITY) is re-mapped by Message-ID, without downloads."""
    mailbox = new_mailbox(dovecot)
    with FaultyProxy(dovecot.host, dovecot.port) as proxy:
        proxied = Mailbox(dovecot, mailbox.user, mailbox.password)
        account = add_account(store, settings, proxied)
        with store.session() as session:  # talk to the server through the proxy, to count bytes
            from mailroom.store.models import Account

            acct = session.get(Account, account)
            assert acct is not None
            acct.settings = {**acct.settings, "port": proxy.port}
        big = "x" * 60_000 + "\n"
        with mailbox.client() as other:
            other.create_folder("Work")
            for i in range(5):
                other.append("Work", make_message(f"work-{i}@x", body=big), flags=(b"\\Seen",))
            other.append("Work", make_message("small@x", body="small\n"))
        sync_all(store, account, settings)
        ids = message_ids(store, account)
        with mailbox.client() as other:
            old = other.select_folder("Work")[b"UIDVALIDITY"]
            uids = other.search(["ALL"])
            data = other.fetch(uids, [b"BODY.PEEK[]", b"FLAGS"])
            raws = [data[u][b"BODY[]"] for u in uids]
            flags = [data[u][b"FLAGS"] for u in uids]
            other.close_folder()
            other.delete_folder("Work")
            other.create_folder("Work")
            for raw, flag in zip(raws, flags, strict=True):
                other.append("Work", raw, flags=[f for f in flag if f != b"\\Recent"])
            other.append("Work", make_message("newcomer@x"))
            assert other.select_folder("Work")[b"UIDVALIDITY"] != old
        before = proxy.bytes_server_to_client
        sync_all(store, account, settings)
        transferred = proxy.bytes_server_to_client - before
    after = message_ids(store, account)
    assert {k: v for k, v in after.items() if k != "newcomer@x"} == ids
    assert "newcomer@x" in after
    assert transferred < 60_000, f"{transferred} bytes: a body was downloaded again"
    assert_mirrors(store, account, mailbox)


def test_a_message_moved_into_unimported_history_is_not_deleted(
    store: Store, settings: Settings, mailbox: Mailbox, account: int, other: IMAPClient
) -> None:
    """While Archive is still importing, a message moved into its history keeps its id."""
    for i in range(60):
        other.append("Archive", make_message(f"archived-{i}@x"))
    _seed(other, 1)
    sync_account(store, account, settings=settings)
    from mailroom.providers.imap import import_page

    assert import_page(store, account, settings=settings)  # the inbox
    inbox_id = message_ids(store, account)["inbox-0@x"]
    # Simulate an older state: the message moves into Archive *below* its floor.
    with store.session() as session:
        archive = session.scalars(
            select(Folder).where(Folder.account_id == account, Folder.path == "Archive")
        ).one()
        archive.state = {**archive.state, "import_floor_uid": 200, "last_seen_uid": 200}
    other.select_folder("INBOX")
    other.move([1], "Archive")
    sync_account(store, account, settings=settings)
    assert message_ids(store, account)["inbox-0@x"] == inbox_id
    sync_all(store, account, settings)
    assert message_ids(store, account)["inbox-0@x"] == inbox_id
    assert_mirrors(store, account, mailbox)


@pytest.mark.parametrize("server", ["plain"])
def test_without_condstore_qresync_move_or_esearch(
    store: Store, settings: Settings, plain_dovecot: DovecotServer, server: str
) -> None:
    """On a server without the extensions, flags, moves and deletes are found by a full diff."""
    mailbox = new_mailbox(plain_dovecot)
    account = add_account(store, settings, mailbox)
    with mailbox.client() as other:
        caps = set(other.capabilities())
        assert not {b"CONDSTORE", b"QRESYNC", b"MOVE", b"ESEARCH"} & caps
        other.create_folder("Archive")
        _seed(other, 5)
        sync_all(store, account, settings)
        ids = message_ids(store, account)
        other.select_folder("INBOX")
        other.add_flags([1], [b"\\Flagged", b"\\Seen"])
        other.copy([2], "Archive")
        other.delete_messages([2, 3])
        other.expunge()
        sync_account(store, account, settings=settings)
    assert message_ids(store, account) == {k: v for k, v in ids.items() if k != "inbox-2@x"}
    assert _labels(store)["inbox-1@x"] == ["Archive"]
    assert _labels(store)["inbox-0@x"] == ["Inbox", "Starred"]
    assert_mirrors(store, account, mailbox)
