"""The IMAP commands as a user meets them: keys, account add, accounts, sync; plain errors."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select

from mailroom.store.engine import open_store
from mailroom.store.models import Account
from tests.factories import make_message
from tests.imap.conftest import PASSWORD
from tests.imap.views import Mailbox


def run(
    *args: str, data_dir: Path, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a subprocess, as a user would (no inherited master key)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("MAILROOM_")}
    full_env = {
        **base,
        "MAILROOM_DATA_DIR": str(data_dir),
        "MAILROOM_ALLOWED_PRIVATE_HOSTS": "127.0.0.1",
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "mailroom", *args],
        capture_output=True,
        text=True,
        env=full_env,
        input=stdin,
        timeout=120,
    )


def _plain(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("mailroom: ")
    return line


def test_keys_init_creates_a_private_key_file_once(tmp_path: Path) -> None:
    """keys init writes a 0600 key file, refuses to overwrite it and refuses the data dir."""
    key = tmp_path / "keys" / "master.key"
    done = run("keys", "init", "--file", str(key), data_dir=tmp_path / "data")
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert len(key.read_text().strip()) == 44
    assert "already exists" in _plain(
        run("keys", "init", "--file", str(key), data_dir=tmp_path / "data")
    )
    inside = tmp_path / "data" / "master.key"
    assert "inside the data dir" in _plain(
        run("keys", "init", "--file", str(inside), data_dir=tmp_path / "data")
    )


@pytest.mark.slow
def test_add_sync_and_list_an_imap_account(tmp_path: Path, mailbox: Mailbox) -> None:
    """account add is offline; sync --until-imported brings the mail; accounts shows progress."""
    for i in range(3):
        mailbox.append("INBOX", make_message(f"cli-{i}@x", subject=f"cli {i}"))
    data = tmp_path / "data"
    key = tmp_path / "master.key"
    assert run("keys", "init", "--file", str(key), data_dir=data).returncode == 0
    env = {"MAILROOM_MASTER_KEY_FILE": str(key)}
    added = run(
        "account",
        "add",
        "imap",
        "--name",
        "work",
        "--host",
        "127.0.0.1",
        "--port",
        str(mailbox.server.port),
        "--tls",
        "none",
        "--login",
        mailbox.user,
        "--password-stdin",
        data_dir=data,
        env=env,
        stdin=PASSWORD + "\n",
    )
    assert added.returncode == 0, added.stderr
    listed = run("accounts", "--format", "jsonl", data_dir=data, env=env)
    row = json.loads(listed.stdout)
    assert (row["name"], row["status"], row["watch_state"], row["importing"]) == (
        "work",
        "active",
        "idle",
        True,
    )
    synced = run("sync", "work", "--until-imported", data_dir=data, env=env)
    assert synced.returncode == 0, synced.stderr
    assert "history imported (3 messages)" in synced.stdout
    row = json.loads(run("accounts", "--format", "jsonl", data_dir=data, env=env).stdout)
    assert row["progress"] == "done" and row["import_done"] == 3
    table = run("accounts", data_dir=data, env=env)
    assert "work" in table.stdout and "active" in table.stdout
    messages = run("list", "--format", "jsonl", data_dir=data, env=env)
    assert len(messages.stdout.splitlines()) == 3
    assert key.read_text().strip() not in (data / "mailroom.sqlite3").read_bytes().decode("latin-1")


def test_a_wrong_password_is_one_sentence_and_marks_the_account(
    tmp_path: Path, mailbox: Mailbox
) -> None:
    """sync with a refused login exits 1 with one sentence; accounts shows auth_error."""
    data = tmp_path / "data"
    password_file = tmp_path / "pw"
    password_file.write_text("not-the-password\n")
    env = {"MAILROOM_MASTER_KEY": "A" * 43 + "="}
    added = run(
        "account",
        "add",
        "imap",
        "--name",
        "bad",
        "--host",
        "127.0.0.1",
        "--port",
        str(mailbox.server.port),
        "--tls",
        "none",
        "--login",
        mailbox.user,
        "--password-file",
        str(password_file),
        data_dir=data,
        env=env,
    )
    assert added.returncode == 0, added.stderr
    line = _plain(run("sync", "bad", data_dir=data, env=env))
    assert "refused the login" in line and "check the user name and password" in line
    store = open_store(f"sqlite:///{data / 'mailroom.sqlite3'}", migrate=False)
    try:
        with store.session() as session:
            status, reason = session.execute(select(Account.status, Account.status_reason)).one()
    finally:
        store.dispose()
    assert status == "auth_error" and "refused the login" in reason


def test_user_errors_of_the_imap_commands_are_plain(tmp_path: Path) -> None:
    """No master key, two password sources, an unknown owner: one sentence each."""
    data = tmp_path / "data"
    common = ["account", "add", "imap", "--name", "n", "--host", "imap.example.org", "--login", "u"]
    assert "No master key" in _plain(run(*common, "--password-stdin", data_dir=data, stdin="pw\n"))
    env = {"MAILROOM_MASTER_KEY": "A" * 43 + "="}
    assert "exactly one" in _plain(
        run(*common, "--password-stdin", "--password-file", "x", data_dir=data, env=env, stdin="pw")
    )
    assert "no user called 'me'" in _plain(run("sync", "nope", data_dir=data, env=env))
