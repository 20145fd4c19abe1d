"""`mailroom keys rotate-master` on both stores: re-wraps all, swaps the key, survives kill -9."""

from __future__ import annotations

import base64
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import select, text
from sqlalchemy.engine import make_url

from mailroom.cli.main import cli
from mailroom.crypto import KeyFileWrapper, MasterKeyWrapper, OwnerKeys
from mailroom.crypto.master_rotation import rewrap
from mailroom.errors import ConfigError
from mailroom.secrets import SecretBox, _decode_key, write_key_file
from mailroom.store.engine import Store
from mailroom.store.models import Account, AuditEntry, OwnerKey, WebhookEndpoint
from tests.helpers import make_account


def _key(path: Path) -> bytes:
    return _decode_key(path.read_text(), str(path))


def _env(tmp_path: Path, key_file: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MAILROOM_MASTER_KEY"}
    env.update(MAILROOM_DATA_DIR=str(tmp_path / "data"), MAILROOM_MASTER_KEY_FILE=str(key_file))
    return env


def _cli(store: Store, env: dict[str, str], *args: str) -> Result:
    url = store.engine.url.render_as_string(hide_password=False)
    return CliRunner().invoke(cli, ["--database-url", url, *args], env=env)


def _seed(store: Store, key: bytes) -> tuple[int, bytes]:
    """An account with both passwords, a webhook secret and a data key; (owner, data key)."""
    owner, account_id, _ = make_account(store, owner="alice")
    box = SecretBox(key)
    with store.session() as session:
        account = session.get(Account, account_id)
        assert account is not None
        account.secret = box.seal(b"imap password", f"account:{account_id}")
        account.smtp_secret = box.seal(b"smtp password", f"account:{account_id}:smtp")
        endpoint = WebhookEndpoint(user_id=owner, url="https://hooks.example/x", events=[])
        session.add(endpoint)
        session.flush()
        endpoint.secret = box.seal(b"whsec_1", f"webhook:{endpoint.id}")
        data_key = OwnerKeys(session, MasterKeyWrapper(key)).current(owner).key
    return owner, data_key


def _seeded(store: Store, tmp_path: Path) -> tuple[Path, bytes, int, bytes]:
    """A master key file and the store seeded under it: (file, key, owner, data key)."""
    key_file = write_key_file(tmp_path / "keys" / "master.key", tmp_path / "data")
    old_key = _key(key_file)
    return (key_file, old_key, *_seed(store, old_key))


def _all_open_with(store: Store, key: bytes, owner: int) -> bytes:
    """Every secret opens with ``key``; the owner's data key as that key unwraps it."""
    box = SecretBox(key)
    with store.session() as session:
        (account,) = session.scalars(select(Account)).all()
        (endpoint,) = session.scalars(select(WebhookEndpoint)).all()
        assert account.secret and account.smtp_secret and endpoint.secret
        assert box.open(account.secret, f"account:{account.id}") == b"imap password"
        assert box.open(account.smtp_secret, f"account:{account.id}:smtp") == b"smtp password"
        assert box.open(endpoint.secret, f"webhook:{endpoint.id}") == b"whsec_1"
        return OwnerKeys(session, MasterKeyWrapper(key)).current(owner).key


@contextmanager
def _write_lock_held(store: Store) -> Iterator[None]:
    """A transaction holding the tables the rotation writes, so it cannot commit meanwhile."""
    if store.dialect == "sqlite":
        locker = sqlite3.connect(make_url(store.engine.url).database or "", timeout=30)
        locker.isolation_level = None
        locker.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            locker.rollback()
            locker.close()
        return
    with store.engine.connect() as conn:
        conn.execute(text("LOCK TABLE owner_keys, accounts IN ACCESS EXCLUSIVE MODE"))
        yield
        conn.rollback()


def test_a_rotation_killed_before_its_commit_is_finished_by_running_it_again(
    store: Store, tmp_path: Path
) -> None:
    """kill -9 mid-rotation changes nothing; the rerun re-wraps all, swaps and keeps the old key."""
    key_file, old_key, owner, data_key = _seeded(store, tmp_path)
    env = _env(tmp_path, key_file) | {"PYTHONUNBUFFERED": "1"}
    url = store.engine.url.render_as_string(hide_password=False)
    command = [sys.executable, "-m", "mailroom", "--database-url", url, "keys", "rotate-master"]
    with (
        _write_lock_held(store),
        subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        ) as proc,
    ):
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("Re-wrapping"), line
        time.sleep(1.0)  # it is now waiting for the lock, inside its transaction
        proc.kill()
        assert proc.wait(timeout=30) == -9
    new_file = key_file.with_name("master.key.new")
    assert new_file.exists() and _key(key_file) == old_key
    assert _all_open_with(store, old_key, owner) == data_key  # nothing changed

    finished = _cli(store, _env(tmp_path, key_file), "keys", "rotate-master")
    assert finished.exit_code == 0, finished.output
    new_key = _key(key_file)
    assert new_key != old_key and not new_file.exists()
    assert _key(key_file.with_name("master.key.old")) == old_key
    assert _all_open_with(store, new_key, owner) == data_key  # the same data key, re-wrapped
    with pytest.raises(ConfigError):
        _all_open_with(store, old_key, owner)
    assert "Re-wrapped 1 data keys and 3 secrets" in finished.output
    with store.session() as session:
        (entry,) = session.scalars(select(AuditEntry).where(AuditEntry.action == "key.rotate"))
        assert "1 data keys and 3 secrets re-wrapped" in entry.detail


def test_a_rotation_stopped_after_its_commit_only_swaps_the_key(
    store: Store, tmp_path: Path
) -> None:
    """When the store is under the new key already, the rerun re-wraps nothing and swaps files."""
    key_file, old_key, owner, data_key = _seeded(store, tmp_path)
    new_file = write_key_file(key_file.with_name("master.key.new"), tmp_path / "data")
    new_key = _key(new_file)
    with store.session() as session:
        rewrap(
            session,
            SecretBox(old_key),
            SecretBox(new_key),
            [MasterKeyWrapper(old_key)],
            MasterKeyWrapper(new_key),
        )
    finished = _cli(store, _env(tmp_path, key_file), "keys", "rotate-master")
    assert finished.exit_code == 0, finished.output
    assert "Re-wrapped 0 data keys and 0 secrets (4 were under the new key" in finished.output
    assert _key(key_file) == new_key and _all_open_with(store, new_key, owner) == data_key


def test_a_key_from_the_environment_needs_a_new_key_file(store: Store, tmp_path: Path) -> None:
    """With MAILROOM_MASTER_KEY the key cannot be swapped in place: one sentence says what to do."""
    env = _env(tmp_path, tmp_path / "unused") | {"MAILROOM_MASTER_KEY": "A" * 43 + "="}
    refused = _cli(store, env, "keys", "rotate-master")
    assert refused.exit_code != 0
    assert "give --new-key-file F" in refused.output and "Traceback" not in refused.output


def test_switching_to_an_operator_key_file_rewraps_the_data_keys_under_it(
    store: Store, tmp_path: Path
) -> None:
    """With MAILROOM_KEY_WRAPPER=keyfile the rotation moves data keys to the file's newest key."""
    key_file, old_key, owner, data_key = _seeded(store, tmp_path)
    kms = tmp_path / "keys" / "kms.keys"
    kms.write_text(f"v1 {base64.urlsafe_b64encode(os.urandom(32)).decode()}\n")
    env = _env(tmp_path, key_file) | {
        "MAILROOM_KEY_WRAPPER": "keyfile",
        "MAILROOM_KEY_WRAPPER_FILE": str(kms),
    }
    same = _cli(store, env, "keys", "rotate-master", "--new-key-file", str(key_file))
    assert same.exit_code != 0 and "holds the master key in use" in same.output
    moved = _cli(store, env, "keys", "rotate-master")
    assert moved.exit_code == 0, moved.output
    with store.session() as session:
        (row,) = session.scalars(select(OwnerKey)).all()
        assert row.wrapped_by == "keyfile:v1"
        assert OwnerKeys(session, KeyFileWrapper.from_file(kms)).current(owner).key == data_key
    assert _key(key_file) != old_key
