"""A consistent copy of the running store in a private file, and putting one back.

**SQLite: ``VACUUM INTO``** through the standard library, from a connection
of its own while the engine keeps running. It reads one snapshot (a read
transaction in WAL mode), so the copy is consistent without stopping
writers, and it writes a fresh, compact file: free pages — which may still
hold deleted mail — are not carried into the backup. (The online backup API
copies pages as they are, free ones included.)

**PostgreSQL: ``pg_dump --format=custom``.** pg_dump reads every table in one
snapshot (a REPEATABLE READ, read-only transaction), and it reproduces the
schema exactly — triggers, their functions, sequences, the tsvector table
and its GIN index — which a COPY of each table of our own would have to
re-create by hand. ``pg_restore`` must be at least as new as the pg_dump that
wrote the file, and pg_dump at least as new as the server; both are checked
and said in one sentence. Passwords go to the tools through ``PGPASSWORD``,
never on a command line.

Plain copies live only in the private data dir (0700), named
``.backup-<pid>-<random>.tmp``, and are removed when done; a copy left by a
killed process is removed by the next backup or restore.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import sqlite3
import subprocess
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import Engine, inspect, text
from sqlalchemy.engine import URL

from mailroom.errors import ConfigError, StoreError

TEMP_PATTERN = re.compile(r"^\.backup-(\d+)-[0-9a-f]+\.tmp$")


def temp_path(directory: Path) -> Path:
    """A fresh private temporary name in ``directory`` (which must be private)."""
    return directory / f".backup-{os.getpid()}-{secrets.token_hex(6)}.tmp"


def remove_stale_temps(directory: Path) -> None:
    """Remove plain copies left by backup processes that were killed."""
    remove_orphans(directory, TEMP_PATTERN)


def remove_orphans(directory: Path, pattern: re.Pattern[str]) -> None:
    """Remove the files in ``directory`` whose name ``pattern`` matches with a dead process id.

    The pattern's first group is the id of the process that made the file.
    """
    if not directory.is_dir():
        return
    for entry in directory.iterdir():
        match = pattern.match(entry.name)
        if match and not _alive(int(match.group(1))):
            entry.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- SQLite ----------------------------------------------------------------------------


def _read_only(database: Path) -> str:
    """The URI opening ``database`` read-only (quoted: a path may hold ``?`` or ``#``)."""
    return f"file:{quote(str(database))}?mode=ro"


def sqlite_snapshot(database: Path, target: Path) -> None:
    """``VACUUM INTO target``: a consistent, compact copy of the live database file."""
    connection = sqlite3.connect(_read_only(database), uri=True, isolation_level=None)
    try:
        connection.execute("PRAGMA busy_timeout=30000")
        connection.execute("VACUUM INTO ?", (str(target),))
    except sqlite3.Error as exc:
        raise StoreError(f"The SQLite store {database} could not be copied ({exc}).") from None
    finally:
        connection.close()
    os.chmod(target, 0o600)


def sqlite_is_empty(database: Path) -> bool:
    """True when the file is absent, empty, or a database whose every table has no rows."""
    if not database.exists() or database.stat().st_size == 0:
        return True
    connection = sqlite3.connect(_read_only(database), uri=True)
    try:
        tables = [
            name
            for (name,) in connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
            if name != "alembic_version" and not _fts_shadow(name)
        ]
        return all(
            connection.execute(f'SELECT 1 FROM "{name}" LIMIT 1').fetchone() is None
            for name in tables
        )
    except sqlite3.Error as exc:
        raise StoreError(f"{database} is not a readable SQLite store ({exc}).") from None
    finally:
        connection.close()


def _fts_shadow(name: str) -> bool:
    """FTS5's own tables (``message_search_data`` ...) hold structure even when empty."""
    return name.startswith("message_search_")


def sqlite_put_back(copy: Path, database: Path) -> None:
    """Replace the (empty) store file by ``copy``, atomically, dropping stale side files."""
    for suffix in ("-wal", "-shm", "-journal"):
        database.with_name(database.name + suffix).unlink(missing_ok=True)
    os.replace(copy, database)


# -- PostgreSQL ------------------------------------------------------------------------


def _libpq(url: URL) -> tuple[str, dict[str, str]]:
    """The libpq URL (no password) and the environment that carries the password."""
    env = dict(os.environ)
    if url.password is not None:
        env["PGPASSWORD"] = str(url.password)
    plain = url.set(drivername="postgresql", password=None)
    return plain.render_as_string(hide_password=False), env


def _major(tool: str) -> int:
    """The major version of ``pg_dump`` or ``pg_restore``; ConfigError when it is missing."""
    path = shutil.which(tool)
    if path is None:
        raise ConfigError(
            f"{tool} is not installed; install the PostgreSQL client tools "
            "(Debian: postgresql-client) of the server's version or newer."
        )
    answer = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    found = re.search(r"(\d+)(?:\.\d+)?", answer.stdout)
    if found is None:
        raise ConfigError(f"{tool} --version said {answer.stdout.strip()!r}, not a version.")
    return int(found.group(1))


def server_major(engine: Engine) -> int:
    """The PostgreSQL server's major version."""
    with engine.connect() as conn:
        number = int(conn.execute(text("SHOW server_version_num")).scalar_one())
    return number // 10000


def pg_snapshot(engine: Engine, target: Path) -> dict[str, int]:
    """``pg_dump -Fc`` of the store's database into ``target``; the tool and server versions."""
    server = server_major(engine)
    tool = _major("pg_dump")
    if tool < server:
        raise ConfigError(
            f"pg_dump {tool} cannot dump a PostgreSQL {server} server; install "
            f"postgresql-client-{server} (or newer)."
        )
    _run(engine, "pg_dump", "--format=custom", "--no-owner", "--no-privileges", f"--file={target}")
    os.chmod(target, 0o600)
    return {"server_major": server, "pg_dump_major": tool}


def pg_is_empty(engine: Engine) -> bool:
    """True when the database's schema holds no tables at all (a new database)."""
    with engine.connect() as conn:
        return not inspect(conn).get_table_names()


def pg_tables_are_empty(engine: Engine) -> bool:
    """True when no table of the database's schema has a row (a store never used)."""
    with engine.connect() as conn:
        names = [n for n in inspect(conn).get_table_names() if n != "alembic_version"]
        return all(
            conn.execute(text(f'SELECT 1 FROM "{name}" LIMIT 1')).first() is None for name in names
        )


def pg_put_back(engine: Engine, dump: Path, dumped_by: int) -> None:
    """``pg_restore`` the dump into the (empty) database in one transaction."""
    tool = _major("pg_restore")
    if tool < dumped_by:
        raise ConfigError(
            f"This backup was written by pg_dump {dumped_by}; pg_restore {tool} cannot read it. "
            f"Install postgresql-client-{dumped_by} (or newer)."
        )
    options = ("--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction")
    _run(engine, "pg_restore", *options, str(dump), dbname=True)


def _run(engine: Engine, tool: str, *args: str, dbname: bool = False) -> None:
    """Run a PostgreSQL client tool on the store's database; StoreError with its first line."""
    url, env = _libpq(engine.url)
    target = f"--dbname={url}" if dbname else url  # pg_dump takes it last, pg_restore as --dbname
    answer = subprocess.run(
        [tool, *args, target], capture_output=True, text=True, env=env, check=False
    )
    if answer.returncode != 0:
        raise StoreError(f"{tool} failed: {_first_line(answer.stderr)}")


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "no reason given"
