"""The CLI as a user meets it: plain sentences, no tracebacks, JSON lines."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.factories import make_message
from tests.helpers import write_maildir


def run(
    *args: str, data_dir: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the installed CLI in a subprocess, as a user would."""
    full_env = {**os.environ, "MAILROOM_DATA_DIR": str(data_dir), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "mailroom", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )


def test_import_list_search_roundtrip(tmp_path: Path) -> None:
    """import prints a summary, list --format jsonl prints the documented fields, search finds."""
    root = write_maildir(tmp_path / "mail", {"1": make_message("one@x", subject="Walrus news")})
    done = run("import", str(root), data_dir=tmp_path / "data")
    assert done.returncode == 0, done.stderr
    assert "1 imported" in done.stdout
    again = run("import", str(root), data_dir=tmp_path / "data")
    assert "0 imported, 1 already stored" in again.stdout
    listed = run("list", "--format", "jsonl", data_dir=tmp_path / "data")
    (line,) = listed.stdout.splitlines()
    row = json.loads(line)
    assert set(row) >= {
        "id",
        "account",
        "message_id",
        "thread_id",
        "subject",
        "from",
        "received_at",
        "category",
        "labels",
        "seen",
    }
    assert row["subject"] == "Walrus news" and row["labels"] == ["Inbox"]
    found = run("search", "walrus", "--format", "jsonl", data_dir=tmp_path / "data")
    assert json.loads(found.stdout)["message_id"] == "one@x"


def test_user_errors_are_one_plain_sentence(tmp_path: Path) -> None:
    """A missing path, an unreadable file and a bad database URL exit non-zero without traceback."""
    missing = run("import", str(tmp_path / "nowhere"), data_dir=tmp_path / "d")
    unreadable = _import_unreadable_file()
    bad_url = run(
        "list",
        data_dir=tmp_path / "d",
        env={"MAILROOM_DATABASE_URL": "postgresql+psycopg://nobody@127.0.0.1:1/none"},
    )
    garbage_url = run("list", data_dir=tmp_path / "d", env={"MAILROOM_DATABASE_URL": "not a url"})
    for result in (missing, unreadable, bad_url, garbage_url):
        assert result.returncode != 0
        assert "Traceback" not in result.stderr
        assert result.stderr.startswith("mailroom: ")
        assert len(result.stderr.strip().splitlines()) == 1
    assert "does not exist" in missing.stderr
    assert "database" in bad_url.stderr and "database" in garbage_url.stderr
    assert "not readable" in unreadable.stderr


def _import_unreadable_file() -> subprocess.CompletedProcess[str]:
    """Import a mode-000 file; as root, run the CLI as `nobody` (root reads everything)."""
    folder = Path(tempfile.mkdtemp(prefix="mailroom-perm-"))
    try:
        folder.chmod(0o777)
        locked = folder / "locked.mbox"
        locked.write_bytes(b"From x\n\n")
        locked.chmod(0)
        prefix = []
        if os.geteuid() == 0:
            prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        env = {**os.environ, "MAILROOM_DATA_DIR": str(folder / "data"), "HOME": str(folder)}
        return subprocess.run(
            [*prefix, sys.executable, "-m", "mailroom", "import", str(locked)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
