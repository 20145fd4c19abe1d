"""The IMAP provider id of sealed mail carries no Message-ID, and sync works as with clear ids.

Against the real Dovecot and both stores: a sealing owner's messages are named
``midk:<keyed hash>:<size>``; a move, a UIDVALIDITY change, a JMAP draft's append
and a delete forever still find the server's copies, also across an owner key
rotation started in between; mail stored clear before sealing is still recognised.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest
from imapclient import IMAPClient
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.crypto import MasterKeyWrapper
from mailroom.crypto.datakeys import OwnerKeys
from mailroom.crypto.owner_rotation import Rotator, start_rotation
from mailroom.crypto.sealing import MailSealing, mail_cipher
from mailroom.labels.operations import Operations
from mailroom.providers.imap import propagate_pending
from mailroom.store.engine import Store
from mailroom.store.models import Account, Folder, Message, MessageLocation, PendingChange
from tests.factories import make_message
from tests.helpers import store_bytes
from tests.imap.conftest import add_account, draft_form, new_mailbox, owner_jmap
from tests.imap.views import message_count, sync_all
from tests.jmap.conftest import Jmap
from tests.support.dovecot import DovecotServer
from tests.support.tcpproxy import FaultyProxy

KIND = "imap-provider-id"
_MID = re.compile(r"^message-id:\s*<([^>]+)>", re.IGNORECASE | re.MULTILINE)
BIG = "x" * 60_000 + "\n"  # a body a second download could not hide in the byte count


@pytest.fixture
def wrapper() -> MasterKeyWrapper:
    """The store's key wrapper (a fresh random master key)."""
    return MasterKeyWrapper(os.urandom(32))


@pytest.fixture
def sealed(store: Store, wrapper: MasterKeyWrapper) -> Store:
    """The test store (both kinds) sealing new mail."""
    store.sealing = MailSealing(wrapper, seal_new_mail=True)
    return store


def _mid(n: int) -> str:
    return f"walrus-{n}.7c1f@secret-host.example"


def _seed(other: IMAPClient, count: int, folder: str = "INBOX", body: str = "hi\n") -> None:
    for n in range(count):
        other.append(folder, make_message(_mid(n), subject=f"n{n}", body=body))


def _owner(store: Store, account: int) -> int:
    with store.session() as session:
        return int(session.scalars(select(Account.user_id).where(Account.id == account)).one())


def _provider_ids(store: Store, account: int) -> dict[int, str]:
    with store.session() as session:
        rows = session.execute(
            select(Message.id, Message.provider_id).where(Message.account_id == account)
        ).all()
    return {int(message_id): pid for message_id, pid in rows}


def _sizes(other: IMAPClient) -> dict[str, int]:
    """Message-ID → RFC822.SIZE of every message in the mailbox (read by the test itself)."""
    found: dict[str, int] = {}
    for _flags, _sep, name in other.list_folders():
        other.select_folder(name, readonly=True)
        uids = other.search("ALL")
        for data in other.fetch(uids, [b"RFC822.SIZE", b"BODY.PEEK[HEADER]"]).values():
            mid = _MID.search(data[b"BODY[HEADER]"].decode())
            assert mid is not None
            found[mid.group(1)] = int(data[b"RFC822.SIZE"])
    return found


def _expected_ids(store: Store, owner: int, sizes: dict[str, int]) -> set[str]:
    """The keyed provider ids of these messages under the owner's newest key version."""
    with store.session() as session:
        cipher = mail_cipher(session)
        assert cipher is not None
        return {
            f"midk:{cipher.lookup_hash(owner, KIND, mid)[:32]}:{size}"
            for mid, size in sizes.items()
        }


def _rotate(store: Store, wrapper: MasterKeyWrapper, owner: int) -> int:
    with store.session() as session:
        return start_rotation(session, OwnerKeys(session, wrapper), owner).id


def test_a_sealed_owner_s_provider_ids_and_files_hold_no_message_id(
    sealed: Store, settings: Settings, account: int, other: IMAPClient
) -> None:
    _seed(other, 3)
    sync_all(sealed, account, settings)
    pids = _provider_ids(sealed, account)
    assert len(pids) == 3
    assert set(pids.values()) == _expected_ids(sealed, _owner(sealed, account), _sizes(other))
    contents = store_bytes(sealed)
    for n in range(3):
        assert _mid(n).encode() not in contents, _mid(n)
    assert b"secret-host.example" not in contents


def test_a_clear_owner_s_provider_ids_still_name_the_message_id(
    store: Store, settings: Settings, account: int, other: IMAPClient
) -> None:
    """The baseline the sealed test greps against: clear ids are ``mid:`` and in the file."""
    _seed(other, 2)
    sync_all(store, account, settings)
    sizes = _sizes(other)
    assert set(_provider_ids(store, account).values()) == {
        f"mid:{mid}:{size}" for mid, size in sizes.items()
    }
    assert _mid(0).encode() in store_bytes(store)


@pytest.mark.parametrize("rotation", ["none", "rotation"])
def test_moves_and_a_uidvalidity_change_relocate_without_downloading(
    sealed: Store,
    settings: Settings,
    dovecot: DovecotServer,
    wrapper: MasterKeyWrapper,
    rotation: str,
) -> None:
    """Re-located by keyed id, never stored twice; a UIDVALIDITY change re-maps without a
    download; across an owner key rotation started in between too."""
    mailbox_ = new_mailbox(dovecot)
    with FaultyProxy(dovecot.host, dovecot.port) as proxy:
        account = add_account(sealed, settings, mailbox_)
        with sealed.session() as session:
            acct = session.get(Account, account)
            assert acct is not None
            acct.settings = {**acct.settings, "port": proxy.port}
        with mailbox_.client() as other:
            other.create_folder("Work")
            _seed(other, 4, "Work", BIG)
        sync_all(sealed, account, settings)
        before = _provider_ids(sealed, account)
        owner = _owner(sealed, account)
        rotation_id = _rotate(sealed, wrapper, owner) if rotation == "rotation" else None
        with mailbox_.client() as other:
            other.select_folder("Work")
            other.move([1], "Archive")
        sync_all(sealed, account, settings)  # (its first page of Archive fetches bodies too)
        assert _provider_ids(sealed, account) == before
        assert _located(sealed, account) == {"Archive": 1, "Work": 3}
        with mailbox_.client() as other:
            old = other.select_folder("Work")[b"UIDVALIDITY"]
            uids = other.search(["ALL"])
            raws = [d[b"BODY[]"] for d in other.fetch(uids, [b"BODY.PEEK[]"]).values()]
            other.close_folder()
            other.delete_folder("Work")
            other.create_folder("Work")
            for raw in raws:
                other.append("Work", raw)
            assert other.select_folder("Work")[b"UIDVALIDITY"] != old
        transferred = proxy.bytes_server_to_client
        sync_all(sealed, account, settings)
        transferred = proxy.bytes_server_to_client - transferred
        assert transferred < 60_000, f"{transferred} bytes: a body was downloaded again"
        assert _provider_ids(sealed, account) == before
        assert _located(sealed, account) == {"Archive": 1, "Work": 3}
        if rotation_id is not None:
            Rotator(sealed, wrapper, batch=2).run(rotation_id)
            with mailbox_.client() as other:
                expected = _expected_ids(sealed, owner, _sizes(other))
            assert set(_provider_ids(sealed, account).values()) == expected  # all under v2
            with mailbox_.client() as other:
                other.select_folder("Archive")
                other.move([1], "INBOX")
            sync_all(sealed, account, settings)
            assert set(_provider_ids(sealed, account)) == set(before)
            assert _located(sealed, account) == {"INBOX": 1, "Work": 3}


def _located(store: Store, account: int) -> dict[str, int]:
    """Folder path → how many stored messages have a location there (current UIDVALIDITY)."""
    with store.session() as session:
        rows = session.execute(
            select(Folder.path, MessageLocation.message_id)
            .join(Folder, Folder.id == MessageLocation.folder_id)
            .where(Folder.account_id == account, MessageLocation.uidvalidity == Folder.uidvalidity)
        ).all()
    found: dict[str, int] = {}
    for path, _message in rows:
        found[path] = found.get(path, 0) + 1
    return found


@pytest.mark.parametrize("rotation", ["none", "rotation"])
def test_delete_forever_expunges_the_server_copy(
    sealed: Store,
    settings: Settings,
    account: int,
    other: IMAPClient,
    wrapper: MasterKeyWrapper,
    rotation: str,
) -> None:
    """The delete change keeps the Message-ID sealed; the propagator finds the copy by it."""
    _seed(other, 3)
    other.select_folder("INBOX")
    other.copy([1], "Archive")
    sync_all(sealed, account, settings)
    owner = _owner(sealed, account)
    victim = min(_provider_ids(sealed, account))
    rotation_id = _rotate(sealed, wrapper, owner) if rotation == "rotation" else None
    with sealed.session() as session:
        Operations(session, owner).delete_forever([victim])
    with sealed.session() as session:
        (payload,) = session.scalars(select(PendingChange.payload)).all()
    assert _mid(0) not in str(payload) and "sealed_message_id" in payload
    if rotation_id is not None:  # the rotation ends (v1 dropped) before the change is carried
        Rotator(sealed, wrapper, batch=2).run(rotation_id)
    run = propagate_pending(sealed, account, settings=settings)
    assert run.done == 1 and run.failed == 0
    assert _mid(0) not in _sizes(other)  # both copies expunged
    assert {_mid(1), _mid(2)} <= set(_sizes(other))
    sync_all(sealed, account, settings)
    assert message_count(sealed, account) == 2


def test_mail_stored_clear_before_sealing_is_recognised(
    store: Store, settings: Settings, account: int, other: IMAPClient, wrapper: MasterKeyWrapper
) -> None:
    """Clear ``mid:`` rows are found after sealing is switched on: moved, not stored twice."""
    store.sealing = MailSealing(wrapper, seal_new_mail=False)
    _seed(other, 2)
    sync_all(store, account, settings)
    before = _provider_ids(store, account)
    assert all(pid.startswith("mid:") for pid in before.values())
    store.sealing = MailSealing(wrapper, seal_new_mail=True)
    other.select_folder("INBOX")
    other.move([1], "Archive")
    other.append("INBOX", make_message("later.9d@secret-host.example"))
    sync_all(store, account, settings)
    after = _provider_ids(store, account)
    assert {k: v for k, v in after.items() if k in before} == before
    (new,) = set(after) - set(before)
    assert after[new].startswith("midk:")
    assert _located(store, account) == {"INBOX": 2, "Archive": 1}
    victim = next(k for k, v in before.items() if _mid(1) in v)
    with store.session() as session:
        Operations(session, _owner(store, account)).delete_forever([victim])
    assert propagate_pending(store, account, settings=settings).done == 1
    assert _mid(1) not in _sizes(other)


@pytest.fixture
def jmap(sealed: Store, account: int) -> Iterator[Jmap]:
    """A JMAP client of the sealing owner of the IMAP account, on a real server."""
    yield from owner_jmap(sealed, account)


@pytest.mark.parametrize("rotation", ["none", "rotation"])
def test_a_draft_created_over_jmap_is_appended_and_found_once(
    sealed: Store,
    settings: Settings,
    account: int,
    other: IMAPClient,
    jmap: Jmap,
    wrapper: MasterKeyWrapper,
    rotation: str,
) -> None:
    """Named keyed when created, appended once, recognised by the next syncs (and the rotation)."""
    sync_all(sealed, account, settings)
    result = jmap.call("Email/set", {"create": {"d": draft_form(jmap)}})
    assert result["notCreated"] is None, result["notCreated"]
    (pid,) = _provider_ids(sealed, account).values()
    assert pid.startswith("midk:")
    owner = _owner(sealed, account)
    rotation_id = _rotate(sealed, wrapper, owner) if rotation == "rotation" else None
    run = propagate_pending(sealed, account, settings=settings)
    assert run.done == 1 and run.failed == 0
    with sealed.session() as session:  # an append whose outcome was lost binds the copy
        for change in session.scalars(select(PendingChange)):
            change.state, change.done_at = "pending", None
    propagate_pending(sealed, account, settings=settings)
    other.select_folder("Drafts", readonly=True)
    assert len(other.search("ALL")) == 1
    sync_all(sealed, account, settings)
    assert message_count(sealed, account) == 1
    if rotation_id is not None:
        Rotator(sealed, wrapper, batch=2).run(rotation_id)
        assert set(_provider_ids(sealed, account).values()) == _expected_ids(
            sealed, owner, _sizes(other)
        )
        sync_all(sealed, account, settings)
        assert message_count(sealed, account) == 1
