"""Encrypted backups on both stores: restore gives the same JMAP view; damage is refused."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import text

from mailroom.backup.keys import BackupKey
from mailroom.backup.operations import create_backup, restore_backup, verify_backup
from mailroom.backup.stream import DamagedBackup
from mailroom.cli.main import cli
from mailroom.errors import ConfigError
from mailroom.secrets import generate_key
from mailroom.store.engine import Store, open_store
from tests.jmap.conftest import Jmap, Person, run_server, seed

pytestmark = pytest.mark.usefixtures("pg_tools")


def _view(store: Store, people: list[Person]) -> dict[str, Any]:
    """What each person's JMAP client sees over real HTTP: ids, states, counts, mail."""
    serving = run_server(store)
    server = next(serving)
    seen: dict[str, Any] = {}
    try:
        for person in people:
            with Jmap(server, person) as client:
                mailboxes = client.call("Mailbox/get", {"ids": None})
                query = client.call("Email/query", {"sort": [{"property": "receivedAt"}]})
                emails = client.call(
                    "Email/get",
                    {
                        "ids": query["ids"],
                        "properties": ["threadId", "mailboxIds", "keywords", "subject", "blobId"],
                    },
                )
                threads = client.call(
                    "Thread/get", {"ids": [e["threadId"] for e in emails["list"]]}
                )
                seen[person.name] = {
                    "mailboxes": mailboxes,
                    "query": query,
                    "emails": emails,
                    "threads": threads,
                }
    finally:
        next(serving, None)
    return seen


def _people(store: Store) -> list[Person]:
    alice, bob = seed(store, "alice"), seed(store, "bob", prefix="bob-")
    return [alice, bob]


def test_restore_into_a_new_store_gives_the_same_jmap_view(
    store: Store, tmp_path: Path, key: BackupKey, empty_url: str
) -> None:
    """Ids, states, counts and mail are the same over JMAP after backup and restore."""
    people = _people(store)
    serving = run_server(store)
    server = next(serving)
    with Jmap(server, people[0]) as client:  # a change, so states are past their start
        starred = client.call(
            "Email/set",
            {"update": {f"M{people[0].messages['hello']}": {"keywords/$flagged": True}}},
        )
    next(serving, None)
    assert starred.get("updated"), starred
    before = _view(store, people)
    path = tmp_path / "store.mrb"
    written = create_backup(store, tmp_path / "data", path, key)
    assert written.manifest["store"] == store.dialect and path.stat().st_size == written.size
    assert verify_backup(path, key)["files"][0]["sha256"] == written.manifest["files"][0]["sha256"]
    restored = restore_backup(empty_url, tmp_path / "data2", path, key)
    assert restored.manifest["created"] == written.manifest["created"]
    copy = open_store(empty_url, tmp_path / "data2")
    try:
        assert _view(copy, people) == before
        with copy.session() as session:
            actions = session.execute(text("SELECT action FROM audit_log")).scalars().all()
        assert "backup.restore" in actions  # then the sign-ins of the second view
    finally:
        copy.dispose()
    assert not [p for p in (tmp_path / "data2").iterdir() if p.name.startswith(".backup-")]


def test_a_changed_cut_or_foreign_backup_is_refused(
    store: Store, tmp_path: Path, key: BackupKey, empty_url: str
) -> None:
    """One flipped byte, a cut, or another key: verify and restore refuse, nothing is restored."""
    seed(store, "alice")
    path = tmp_path / "store.mrb"
    create_backup(store, tmp_path / "data", path, key)
    good = path.read_bytes()
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0x01
    cases = {
        "flipped.mrb": bytes(flipped),
        "cut-in-a-chunk.mrb": good[:-1],
        "grown.mrb": good + good[-200:],
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(DamagedBackup):
            verify_backup(tmp_path / name, key)
    with pytest.raises(DamagedBackup):
        restore_backup(empty_url, tmp_path / "data2", tmp_path / "flipped.mrb", key)
    other = BackupKey(os.urandom(32), "file")
    with pytest.raises(ConfigError, match="another backup key file"):
        verify_backup(path, other)
    # Nothing was put into the new store: it is still empty and takes the good backup.
    restore_backup(empty_url, tmp_path / "data2", path, key)


def test_a_store_with_data_is_never_restored_into(
    store: Store, tmp_path: Path, key: BackupKey, empty_url: str
) -> None:
    """A store with data is refused in one sentence; a migrated one without rows as said."""
    seed(store, "alice")
    path = tmp_path / "store.mrb"
    create_backup(store, tmp_path / "data", path, key)
    url = store.engine.url.render_as_string(hide_password=False)
    with pytest.raises(ConfigError, match="already holds data; a backup is restored only into"):
        restore_backup(url, tmp_path / "data", path, key)
    open_store(empty_url, tmp_path / "fresh").dispose()  # migrated, no rows
    if store.dialect == "sqlite":  # replaced whole
        assert restore_backup(empty_url, tmp_path / "fresh", path, key).manifest
    else:  # pg_restore would meet the tables: a new database is asked for
        with pytest.raises(ConfigError, match="has mailroom's tables already"):
            restore_backup(empty_url, tmp_path / "fresh", path, key)


def _grow(store: Store, megabytes: int) -> None:
    """A large raw blob, so writing a backup takes long enough to be killed midway."""
    with store.session() as session:
        session.execute(
            text("INSERT INTO blobs (sha256, size, data, created_at) VALUES (:s, :n, :d, :t)"),
            {
                "s": "f" * 64,
                "n": megabytes << 20,
                "d": os.urandom(megabytes << 20),
                "t": "2026-01-01 00:00:00",
            },
        )


def test_kill_9_during_a_backup_leaves_the_earlier_one_usable(store: Store, tmp_path: Path) -> None:
    """A backup process killed while writing leaves the older file verifiable, no half-file."""
    seed(store, "alice")
    key_file = tmp_path / "backup.key"
    key_file.write_text("A" * 43 + "=\n")
    from mailroom.backup.keys import backup_key
    from mailroom.config import Settings

    key = backup_key(Settings(data_dir=tmp_path / "data"), key_file)
    path = tmp_path / "store.mrb"
    create_backup(store, tmp_path / "data", path, key)
    older = path.read_bytes()
    _grow(store, 12)
    url = store.engine.url.render_as_string(hide_password=False)
    env = {**os.environ, "MAILROOM_DATA_DIR": str(tmp_path / "data"), "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "mailroom", "--database-url", url, "backup", "create"]
    process = subprocess.Popen([*command, str(path), "--key-file", str(key_file)], env=env)
    partials: list[Path] = []
    deadline = time.monotonic() + 60
    while not partials and process.poll() is None and time.monotonic() < deadline:
        partials = [p for p in tmp_path.iterdir() if p.name.startswith(".store.mrb.partial-")]
        time.sleep(0.001)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert partials, "the backup ended before it could be killed mid-write"
    assert process.returncode == -signal.SIGKILL
    assert path.read_bytes() == older  # the earlier backup, whole, under its name
    assert verify_backup(path, key)["store"] == store.dialect
    # The next backup replaces it and removes the killed one's half-file.
    create_backup(store, tmp_path / "data", path, key)
    assert path.read_bytes() != older
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]
    assert not [p for p in (tmp_path / "data").iterdir() if p.name.startswith(".backup-")]


def test_the_commands_restore_on_a_new_machine_with_the_master_key(
    store: Store, tmp_path: Path, empty_url: str
) -> None:
    """The commands restore elsewhere with the same master key; another master key is refused."""
    seed(store, "alice")
    url = store.engine.url.render_as_string(hide_password=False)
    path = tmp_path / "store.mrb"
    master = generate_key()

    def run(database: str, data: str, key: str, *args: str) -> tuple[int, str]:
        env = {"MAILROOM_DATA_DIR": str(tmp_path / data), "MAILROOM_MASTER_KEY": key}
        result = CliRunner().invoke(cli, ["--database-url", database, "backup", *args], env=env)
        return result.exit_code, result.output

    code, said = run(url, "old", master, "create", str(path))
    assert code == 0 and said.startswith(f"Backed up the {store.dialect} store"), said
    code, said = run(empty_url, "new", generate_key(), "restore", str(path))
    assert code == 1 and "made with a key derived from another master key" in said, said
    assert run(empty_url, "new", master, "verify", str(path))[0] == 0
    code, said = run(empty_url, "new", master, "restore", str(path))
    assert code == 0 and said.startswith("Restored the backup made"), said
    copy = open_store(empty_url, tmp_path / "new")
    try:
        with copy.session() as session:
            names = session.execute(text("SELECT name FROM users")).scalars().all()
    finally:
        copy.dispose()
    assert names == ["alice"]
