"""Backup fixtures: a backup key, and an empty store of the same kind to restore into."""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from mailroom.backup.keys import BackupKey
from mailroom.store.engine import Store
from tests.conftest import private_database, service_missing


@pytest.fixture
def pg_tools(store: Store) -> None:
    """PostgreSQL backups need pg_dump and pg_restore (scripts/test-services.sh installs them)."""
    if store.dialect == "postgresql":
        for tool in ("pg_dump", "pg_restore"):
            if shutil.which(tool) is None:
                service_missing(tool, "package postgresql-client")


@pytest.fixture
def key() -> BackupKey:
    """A random backup key, as a key file would give."""
    return BackupKey(secrets.token_bytes(32), "file")


@pytest.fixture
def empty_url(store: Store, tmp_path: Path) -> Iterator[str]:
    """The URL of a new, empty store of the test store's kind (a new file or database)."""
    if store.dialect == "sqlite":
        yield f"sqlite:///{tmp_path / 'restored' / 'mailroom.sqlite3'}"
        return
    with private_database(store.engine.url, "mailroom_restore") as url:
        yield url
