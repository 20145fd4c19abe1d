"""Shared fixtures: a migrated store on SQLite and on PostgreSQL for every store test.

PostgreSQL is found through MAILROOM_TEST_DATABASE_URL (default: the local
server). Under CI=true a missing service fails the run; elsewhere the
PostgreSQL half of a test is skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from mailroom.store.engine import Store, open_store
from mailroom.store.models import Base

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples" / "demo-maildir"
DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
IN_CI = os.environ.get("CI", "").lower() == "true"


def service_missing(what: str, detail: str) -> None:
    """Fail under CI, skip elsewhere: a missing service is never silently ignored in CI."""
    message = f"{what} is not reachable ({detail})"
    if IN_CI:
        pytest.fail(message + "; CI must provide it", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite database file that each test copies."""
    path = tmp_path_factory.mktemp("sqlite-template") / "template.sqlite3"
    store = open_store(f"sqlite:///{path}")
    store.dispose()
    return path


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A private, migrated PostgreSQL database for this test session (dropped at the end)."""
    admin_url = make_url(os.environ.get("MAILROOM_TEST_DATABASE_URL", DEFAULT_PG))
    name = f"mailroom_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # noqa: BLE001 - any connection failure means "missing"
        admin.dispose()
        service_missing("PostgreSQL", str(exc).splitlines()[0])
    url = admin_url.set(database=name).render_as_string(hide_password=False)
    open_store(url).dispose()
    yield url
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _truncate_all(store: Store) -> None:
    names = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    with store.engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {names}, message_search RESTART IDENTITY CASCADE"))


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A freshly migrated, empty store — once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        template = request.getfixturevalue("sqlite_template")
        path = tmp_path / "store.sqlite3"
        shutil.copy(template, path)
        opened = open_store(f"sqlite:///{path}", tmp_path, migrate=False)
    else:
        url = request.getfixturevalue("postgres_url")
        opened = open_store(url, tmp_path, migrate=False)
        _truncate_all(opened)
    yield opened
    opened.dispose()


@pytest.fixture
def sample_maildir() -> Path:
    """The shipped sample corpus (a Maildir with folders)."""
    if not SAMPLES.is_dir():
        pytest.fail("samples/demo-maildir is missing from the repository")
    return SAMPLES
