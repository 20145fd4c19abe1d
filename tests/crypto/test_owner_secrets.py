"""Owner secrets outside the database: deleting an owner makes even an earlier backup unreadable."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from sqlalchemy import select

from mailroom.backup.keys import BackupKey
from mailroom.backup.operations import create_backup, restore_backup
from mailroom.config import Settings
from mailroom.crypto import KeyGone, MasterKeyWrapper
from mailroom.crypto.choice import wrapper_from_settings
from mailroom.crypto.mail_reading import body_of
from mailroom.crypto.owner_secrets import OwnerSecretWrapper
from mailroom.crypto.sealing import MailSealing
from mailroom.crypto.shredding import delete_owner
from mailroom.errors import ConfigError
from mailroom.secrets import generate_key
from mailroom.store.engine import Store, open_store
from mailroom.store.models import Message
from tests.backup.conftest import empty_url, key, pg_tools  # noqa: F401 (fixtures)
from tests.factories import make_message
from tests.helpers import ingest, make_account

ALICE_PHRASE = "the purple hippopotamus dances at midnight"
BOB_PHRASE = "wombats prefer the northern burrow"


def test_a_wrapped_key_needs_its_owners_secret_and_opens_nowhere_once_it_is_forgotten(
    tmp_path: Path,
) -> None:
    inner = MasterKeyWrapper(os.urandom(32))
    wrapper = OwnerSecretWrapper(inner, tmp_path / "secrets")
    data_key = os.urandom(32)
    wrapped = wrapper.wrap(data_key, "owner:7:key:1")
    assert wrapper.unwrap(wrapped, "owner:7:key:1") == data_key
    secret = tmp_path / "secrets" / "owner-7.key"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "secrets").stat().st_mode) == 0o700
    with pytest.raises(ConfigError):  # bound to its owner and version
        wrapper.unwrap(wrapped, "owner:8:key:1")
    # The inner wrapper alone cannot open it: the database and the master key are not enough.
    with pytest.raises(ConfigError):
        inner.unwrap(wrapped, "owner:7:key:1")
    # A key wrapped before the secrets directory was set still opens.
    older = inner.wrap(data_key, "owner:7:key:1")
    assert wrapper.unwrap(older, "owner:7:key:1") == data_key

    assert wrapper.forget(7) is True
    assert not secret.exists()
    with pytest.raises(KeyGone, match="owner 7 is not in"):
        wrapper.unwrap(wrapped, "owner:7:key:1")
    assert wrapper.forget(7) is False


def test_the_secrets_directory_may_not_lie_in_the_data_dir(tmp_path: Path) -> None:
    settings = Settings(
        data_dir=tmp_path,
        master_key=generate_key(),
        owner_secrets_dir=tmp_path / "secrets",
    )
    with pytest.raises(ConfigError, match="lies inside the data dir"):
        wrapper_from_settings(settings)
    outside = Settings(
        data_dir=tmp_path / "data",
        master_key=generate_key(),
        owner_secrets_dir=tmp_path / "secrets",
    )
    assert isinstance(wrapper_from_settings(outside), OwnerSecretWrapper)


@pytest.mark.usefixtures("pg_tools")
def test_a_backup_made_before_an_owners_deletion_no_longer_opens_their_mail(
    store: Store,
    tmp_path: Path,
    key: BackupKey,  # noqa: F811 (the fixture)
    empty_url: str,  # noqa: F811
) -> None:
    """Both stores: restore an earlier backup after alice's deletion; bob reads, alice cannot."""
    sealing = MailSealing(
        OwnerSecretWrapper(MasterKeyWrapper(os.urandom(32)), tmp_path / "secrets"),
        seal_new_mail=True,
    )
    store.sealing = sealing
    alice, bob = make_account(store, "alice", "a"), make_account(store, "bob", "b")
    ingest(store, alice, [("a1", make_message("a1@alice.example", body=ALICE_PHRASE))])
    ingest(store, bob, [("b1", make_message("b1@bob.example", body=BOB_PHRASE))])
    path = tmp_path / "before.mrb"
    create_backup(store, tmp_path / "data", path, key)

    delete_owner(store, "alice")
    assert not (tmp_path / "secrets" / f"owner-{alice[0]}.key").exists()
    assert (tmp_path / "secrets" / f"owner-{bob[0]}.key").exists()

    restore_backup(empty_url, tmp_path / "data2", path, key)
    copy = open_store(empty_url, tmp_path / "data2")
    copy.sealing = sealing  # the same master key and secrets directory as before
    try:
        with copy.session() as session:
            ids = {int(u): int(m) for u, m in session.execute(select(Message.user_id, Message.id))}
            assert set(ids) == {alice[0], bob[0]}  # the backup still holds alice's rows...
            bobs = body_of(session, ids[bob[0]])
            assert bobs is not None and BOB_PHRASE in bobs.text_body
            with pytest.raises(KeyGone, match=f"owner {alice[0]} is not in"):
                body_of(session, ids[alice[0]])  # ...but nothing opens them
    finally:
        copy.dispose()
