"""``backup create``, ``verify`` and ``restore``: the steps around the file format.

Restoring goes only into an empty store: a SQLite file that is absent or has
no rows in any table, or a PostgreSQL database without tables (a new one).
Restored, the store is migrated to this mailroom's schema if the backup is
older, and the restore is recorded in its audit log.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mailroom import __version__
from mailroom.audit import Origin, record
from mailroom.backup import snapshot
from mailroom.backup.archive import (
    DATA_FILES,
    Written,
    created_at,
    read_backup,
    remove_stale_partials,
    write_backup,
)
from mailroom.backup.keys import BackupKey
from mailroom.errors import ConfigError
from mailroom.store.engine import Store, create_store_engine, open_store
from mailroom.store.files import private_dir
from mailroom.store.migrate import schema_revision


def create_backup(
    store: Store, data_dir: Path, path: Path, key: BackupKey, origin: Origin | None = None
) -> Written:
    """Snapshot the running ``store`` and seal it into a new backup file at ``path``."""
    path = path.expanduser().absolute()
    if path.is_dir():
        raise ConfigError(f"{path} is a directory; give the backup file's name.")
    if not path.parent.is_dir():
        raise ConfigError(f"The directory {path.parent} does not exist.")
    private_dir(data_dir)
    snapshot.remove_stale_temps(data_dir)
    remove_stale_partials(path)
    manifest: dict[str, Any] = {
        "format": 1,
        "mailroom_version": __version__,
        "store": store.dialect,
        "schema_revision": schema_revision(store),
        "created": created_at(),
    }
    copy = snapshot.temp_path(data_dir)
    try:
        if store.dialect == "sqlite":
            database = store.engine.url.database
            if not database:
                raise ConfigError("An in-memory SQLite store cannot be backed up.")
            snapshot.sqlite_snapshot(Path(database), copy)
        else:
            manifest.update(snapshot.pg_snapshot(store.engine, copy))
        written = write_backup(path, key, manifest, copy)
    finally:
        copy.unlink(missing_ok=True)
    with store.session() as session:
        record(session, "backup.create", origin=origin, detail=_detail(written))
    return written


def _detail(written: Written) -> str:
    return f"{written.path} ({written.size} bytes, sha256 {written.sha256})"


def verify_backup(path: Path, key: BackupKey) -> dict[str, Any]:
    """Decrypt every chunk and check every file's SHA-256; the manifest (DamagedBackup if not)."""
    manifest, _ = read_backup(path.expanduser(), key)
    return manifest


@dataclass(frozen=True)
class Restored:
    """What a restore put back."""

    manifest: dict[str, Any]
    url: str


def restore_backup(url: str, data_dir: Path, path: Path, key: BackupKey) -> Restored:
    """Put the backup at ``path`` into the empty store at ``url``; refuses a store with data."""
    path = path.expanduser().absolute()
    private_dir(data_dir)
    snapshot.remove_stale_temps(data_dir)
    engine = create_store_engine(url)
    dialect = engine.dialect.name
    try:
        database = (
            Path(engine.url.database) if dialect == "sqlite" and engine.url.database else None
        )
        if dialect == "sqlite" and database is None:
            raise ConfigError("A backup cannot be restored into an in-memory SQLite store.")
        if database is not None:
            empty = snapshot.sqlite_is_empty(database)
        else:
            empty = snapshot.pg_is_empty(engine)
            if not empty and snapshot.pg_tables_are_empty(engine):
                raise ConfigError(
                    f"The database {engine.url.render_as_string(hide_password=True)} has "
                    "mailroom's tables already (without mail); pg_restore creates them, so "
                    "restore into a new database (`createdb NAME`)."
                )
    finally:
        engine.dispose()
    where = (
        str(database) if database is not None else engine.url.render_as_string(hide_password=True)
    )
    if not empty:
        raise ConfigError(
            f"The store {where} already holds data; a backup is restored only into an empty "
            "store (a new data dir or a new database)."
        )
    staging = database.parent if database is not None else data_dir
    private_dir(staging)
    manifest, files = read_backup(path, key, extract_to=staging)
    try:
        if manifest["store"] != dialect:
            raise ConfigError(
                f"This backup is of a {manifest['store']} store and cannot be restored into "
                f"{dialect}; give a {manifest['store']} database URL."
            )
        copy = files[DATA_FILES[dialect]]
        if database is not None:
            snapshot.sqlite_put_back(copy, database)
        else:
            engine = create_store_engine(url)
            try:
                snapshot.pg_put_back(engine, copy, int(manifest.get("pg_dump_major", 0)))
            finally:
                engine.dispose()
    finally:
        for leftover in files.values():
            leftover.unlink(missing_ok=True)
    store = open_store(url, data_dir)  # brings an older backup's schema up to date
    try:
        with store.session() as session:
            detail = (
                f"{path} (made {manifest.get('created')}, schema {manifest.get('schema_revision')})"
            )
            record(session, "backup.restore", detail=detail)
    finally:
        store.dispose()
    return Restored(manifest, where)
