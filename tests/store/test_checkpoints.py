"""Background checkpoints: a bulk import's log is copied into the database file by a thread."""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import text

from mailroom.store import Store
from mailroom.store.checkpoints import background_checkpoints


def _write_rows(store: Store, count: int) -> None:
    """Commit ``count`` wide rows (SQLite) on a connection that does not checkpoint itself."""
    with store.engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_autocheckpoint=0")
        connection.execute(text("CREATE TABLE IF NOT EXISTS filler (id INTEGER, body TEXT)"))
        connection.execute(
            text("INSERT INTO filler (id, body) VALUES (:id, :body)"),
            [{"id": n, "body": "x" * 4000} for n in range(count)],
        )
        connection.commit()
        connection.exec_driver_sql("PRAGMA wal_autocheckpoint=8192")


def _database_file(store: Store) -> Path:
    database = store.engine.url.database
    assert database is not None
    return Path(database)


def test_the_log_reaches_the_database_file_while_the_block_runs(store: Store) -> None:
    if store.dialect != "sqlite":  # nothing to checkpoint: the context only runs the block
        with background_checkpoints(store, every=0.01), store.engine.connect() as connection:
            assert connection.execute(text("SELECT 1")).scalar() == 1
        return
    path = _database_file(store)
    _write_rows(store, 1)  # the table exists; from here on only the log grows
    with store.engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    before = path.stat().st_size
    with background_checkpoints(store, every=0.05):
        _write_rows(store, 500)  # 2 MB, left in the log by the writing connection
        deadline = time.monotonic() + 10
        # A passive checkpoint may copy part of the log and the rest on its next turn.
        while path.stat().st_size <= before + 1_000_000 and time.monotonic() < deadline:
            time.sleep(0.05)
        grown = path.stat().st_size
    assert grown > before + 1_000_000


def test_without_it_the_writer_leaves_the_log_alone(store: Store) -> None:
    """The control for the test above: the file grows only through a checkpoint."""
    if store.dialect != "sqlite":
        return
    path = _database_file(store)
    _write_rows(store, 1)
    with store.engine.connect() as connection:
        connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    before = path.stat().st_size
    _write_rows(store, 500)
    time.sleep(0.3)
    assert path.stat().st_size == before
