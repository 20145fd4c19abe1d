"""The data dir is 0700 and every file in it 0600, whatever the umask."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from mailroom.config import Settings
from mailroom.jobs.queues import make_queues
from mailroom.store.engine import open_store


@pytest.fixture
def usual_umask() -> Iterator[None]:
    """Run with the umask most systems have (022), then restore the old one."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _open_everything(data_dir: Path) -> None:
    store = open_store(f"sqlite:///{data_dir / 'mailroom.sqlite3'}", data_dir)
    queues = make_queues(Settings(data_dir=data_dir, redis_url=None), ("ingest",))
    queues["ingest"].storage.enqueue(b"job", 0)
    with store.session() as session:  # keep a connection open so -wal and -shm exist
        session.execute(text("CREATE TABLE IF NOT EXISTS probe (x)"))
        session.execute(text("INSERT INTO probe VALUES (1)"))
        names = {p.name for p in data_dir.iterdir()}
        assert {"mailroom.sqlite3", "mailroom.sqlite3-wal", "mailroom.sqlite3-shm"} <= names
        assert "queues.sqlite3" in names
        for path in data_dir.iterdir():
            assert _mode(path) == 0o600, f"{path.name} is {_mode(path):04o}"
    store.dispose()


def test_fresh_data_dir_is_private(tmp_path: Path, usual_umask: None) -> None:
    """A store and queues opened in a new data dir under umask 022 leave only 0700 and 0600."""
    data_dir = tmp_path / "data"
    _open_everything(data_dir)
    assert _mode(data_dir) == 0o700
    for path in data_dir.iterdir():
        assert _mode(path) == 0o600, f"{path.name} is {_mode(path):04o}"


def test_open_data_dir_is_tightened_with_one_log_line(
    tmp_path: Path, usual_umask: None, caplog: pytest.LogCaptureFixture
) -> None:
    """An existing 0755 data dir and 0644 store file are tightened; the dir is logged once."""
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    os.chmod(data_dir, 0o755)
    open_store(f"sqlite:///{data_dir / 'mailroom.sqlite3'}").dispose()
    os.chmod(data_dir / "mailroom.sqlite3", 0o644)
    with caplog.at_level(logging.INFO, logger="mailroom"):
        _open_everything(data_dir)
    assert _mode(data_dir) == 0o700
    lines = [r.getMessage() for r in caplog.records if str(data_dir) in r.getMessage()]
    assert len(lines) == 1 and "0755" in lines[0] and "0700" in lines[0], lines
