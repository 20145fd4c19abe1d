"""Opening the store: engine, migrations and the one ``session_scope``.

``open_store(url)`` creates the SQLite directory if needed, brings the schema
to the newest Alembic revision (schema changes happen only through
migrations) and returns a :class:`Store`. Sessions are short: a worker opens
one per unit of work and holds ids, not entity objects, across commits.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from mailroom.errors import StoreError
from mailroom.store.files import private_dir, private_file

if TYPE_CHECKING:
    from mailroom.crypto.sealing import MailSealing

log = logging.getLogger(__name__)

SEALING_INFO_KEY = "mailroom.sealing"  # where a session carries its store's sealing


class Store:
    """A database holding mailroom's mail: an engine plus a session factory.

    ``sealing`` (``mailroom.crypto.sealing``) is the key wrapper and the seal-new-mail
    switch every session of this store carries; None for a store opened without keys.
    """

    def __init__(
        self, engine: Engine, data_dir: Path | None = None, sealing: MailSealing | None = None
    ) -> None:
        self.engine = engine
        self.data_dir = data_dir
        self.sealing = sealing
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    @property
    def dialect(self) -> str:
        """``sqlite`` or ``postgresql``."""
        return self.engine.dialect.name

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session committed on success and rolled back on any exception."""
        session = self._sessions()
        if self.sealing is not None:
            session.info[SEALING_INFO_KEY] = self.sealing
        try:
            yield session
            session.commit()
        except BaseException:
            session.rollback()
            raise
        finally:
            session.close()

    def dispose(self) -> None:
        """Close all pooled connections."""
        self.engine.dispose()


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """WAL with synchronous=NORMAL: a commit writes the log, a checkpoint syncs it.

    Checkpoints every 8,192 pages (64 MiB of log) rather than SQLite's 1,000: an
    import writes about four times its raw size (bodies, search index, raw
    bytes), and each checkpoint costs two fsyncs. The log file is cut back to
    64 MiB after a checkpoint. Bulk writes (a local import, ``mailroom sync``'s history
    import, an IMAP sync finding more than a page of new mail) also checkpoint from a
    background thread (``store.checkpoints``), so their writer rarely does. Pages are 8 KiB
    (set when the file is created; an existing file keeps its size): a typical
    raw message then fits one page instead of spilling onto overflow pages, and
    commits write fewer, larger pages (importing the SpamAssassin corpus spent
    40 % less time committing).
    Each connection caches up to 16 MiB of pages instead of SQLite's 2 MiB: an
    import's writer keeps the indexes it updates in memory (its CPU time fell by
    7 %, bench/RESULTS.md); the cache fills only as pages are read, so a reader
    that touches little holds little.
    """
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA page_size=8192")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA wal_autocheckpoint=8192")
    cursor.execute("PRAGMA journal_size_limit=67108864")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA cache_size=-16384")  # KiB
    cursor.close()
    # mailroom, not the driver, starts transactions (see _begin_before_first_write).
    dbapi_connection.isolation_level = None


# Statements that only read: before the first write they run outside a transaction.
_READS = ("SELECT", "PRAGMA", "EXPLAIN")


def _begin_before_first_write(
    conn: Any, _cursor: Any, statement: str, _params: Any, _context: Any, _many: bool
) -> None:
    """Open ``BEGIN IMMEDIATE`` before the first statement of a unit of work that writes.

    A deferred SQLite transaction that has read and then writes cannot wait
    for the write lock: when another connection committed in between, its
    snapshot is stale and SQLite answers "database is locked" at once, busy
    timeout or not (this reached JMAP clients as ``serverFail`` while imports
    and jobs ran). ``BEGIN IMMEDIATE`` takes the write lock first, and waiting
    for it honours the busy timeout. Reads before the first write run outside
    a transaction, each seeing the latest commit — PostgreSQL's READ COMMITTED,
    which every code path already meets — so read-only sessions never hold
    the lock and never block writers. A SAVEPOINT counts as a write: SQLite
    would otherwise open a deferred transaction for it.
    """
    dbapi = conn.connection.dbapi_connection
    if dbapi is None or dbapi.in_transaction:
        return
    if statement.lstrip()[:7].upper().startswith(_READS):
        return
    dbapi.execute("BEGIN IMMEDIATE")


def create_store_engine(url: str) -> Engine:
    """An engine for ``url`` with mailroom's connection settings, or a StoreError."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StoreError(
            f"The database URL {url!r} is not valid; use sqlite:///PATH or "
            "postgresql+psycopg://USER@HOST/DB."
        ) from None
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise StoreError(
            f"The database {backend!r} is not supported; use sqlite:///PATH or "
            "postgresql+psycopg://USER@HOST/DB."
        )
    if backend == "sqlite":
        database = parsed.database or ""
        if database and database != ":memory:":
            path = Path(database).expanduser()
            if not path.parent.is_dir():
                private_dir(path.parent)
            # Created 0600 before SQLite opens it; its -wal and -shm take this mode.
            private_file(path)
    try:
        if backend == "sqlite":
            engine = create_engine(parsed, connect_args={"timeout": 30})
            event.listen(engine, "connect", _sqlite_pragmas)
            event.listen(engine, "before_cursor_execute", _begin_before_first_write)
        else:
            engine = create_engine(parsed, pool_pre_ping=True)
            event.listen(engine, "connect", _custom_plans)
    except (NoSuchModuleError, ImportError):
        raise StoreError(
            f"No database driver for {parsed.drivername!r}; use postgresql+psycopg://."
        ) from None
    return engine


def _custom_plans(dbapi_connection: Any, _record: Any) -> None:
    """PostgreSQL plans every statement for its own parameters (``plan_cache_mode``).

    psycopg prepares a statement once it has run five times, and PostgreSQL may then
    settle on a generic plan that ignores the values. For a search that plan is the
    same for a word in nine messages out of ten and for a word in none: at 1,000,000
    messages a common word's JMAP search went from 30 ms to 700 ms once the generic
    plan (the owner's whole bitmap, sorted) took over (bench/RESULTS.md, PostgreSQL
    at volume). Planning each time costs a fraction of a millisecond.
    """
    if dbapi_connection.info.server_version < 120000:
        return  # the setting exists from PostgreSQL 12 on
    autocommit = dbapi_connection.autocommit
    dbapi_connection.autocommit = True
    try:
        dbapi_connection.execute("SET plan_cache_mode = force_custom_plan")
    finally:
        dbapi_connection.autocommit = autocommit


def open_store(url: str, data_dir: Path | None = None, *, migrate: bool = True) -> Store:
    """Open (and by default migrate) the store at ``url``; raises StoreError in plain words.

    ``data_dir`` (mailroom's own directory) is made private (0700) first.
    """
    if data_dir is not None:
        private_dir(data_dir)
    engine = create_store_engine(url)
    try:
        with engine.connect():
            pass
    except OperationalError as exc:
        engine.dispose()
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else "no answer"
        raise StoreError(
            f"Cannot connect to the database at {engine.url.render_as_string(hide_password=True)}"
            f" ({reason}); check MAILROOM_DATABASE_URL or --database-url."
        ) from None
    store = Store(engine, data_dir)
    if migrate:
        from mailroom.store.migrate import upgrade

        upgrade(store)
    return store
