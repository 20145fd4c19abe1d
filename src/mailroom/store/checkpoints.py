"""Checkpointing a SQLite log in a background thread while a bulk import writes.

In WAL mode SQLite copies the log back into the database file (a checkpoint)
when a commit leaves it longer than ``wal_autocheckpoint`` pages, and it does
so in the committing connection: an import's writer, the process everything
else waits for, stopped for half a second twice per 6,000 messages to copy
64 MiB (bench/RESULTS.md). :func:`background_checkpoints` runs passive
checkpoints from a second connection in a thread instead, every
``CHECKPOINT_EVERY`` seconds while the import runs: a passive checkpoint copies
what is committed without blocking the writer (or any reader), and the
sqlite3 module releases the GIL while SQLite works, so the copying overlaps
the writer's own work. The writer's automatic checkpoint stays the backstop:
when it comes due, only the frames not copied yet are left for it.

PostgreSQL and in-memory databases have nothing to checkpoint: the context
does nothing there.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager

from mailroom.store.engine import Store

__all__ = ["CHECKPOINT_EVERY", "background_checkpoints"]

log = logging.getLogger(__name__)

CHECKPOINT_EVERY = 0.5  # seconds between passive checkpoints


@contextmanager
def background_checkpoints(store: Store, every: float = CHECKPOINT_EVERY) -> Iterator[None]:
    """Checkpoint ``store``'s log in a background thread while the block runs."""
    database = store.engine.url.database
    if store.dialect != "sqlite" or not database or database == ":memory:":
        yield
        return
    stop = threading.Event()

    def checkpoint() -> None:
        try:
            with closing(sqlite3.connect(database, timeout=1, isolation_level=None)) as conn:
                while not stop.wait(every):
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error as exc:  # the writer's own checkpoints still run
            log.warning("Background checkpoints of %s stopped: %s", database, exc)

    thread = threading.Thread(target=checkpoint, name="wal-checkpoint", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
