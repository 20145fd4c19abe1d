"""Shared fixtures: a migrated store on SQLite and on PostgreSQL for every store test.

PostgreSQL is found through MAILROOM_TEST_DATABASE_URL (default: the local
server). Under CI=true a missing service fails the run; elsewhere the
PostgreSQL half of a test is skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url

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


@contextmanager
def private_database(server_url: str | URL, prefix: str) -> Iterator[str]:
    """A new, empty PostgreSQL database on the server of ``server_url``, dropped at the end.

    Yields its URL; the name is ``prefix`` and a random suffix. Creating it raises
    when the server cannot be reached.
    """
    server = make_url(server_url)
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield server.set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A private, migrated PostgreSQL database for this test session (dropped at the end)."""
    with ExitStack() as cleanup:
        try:
            url = cleanup.enter_context(
                private_database(
                    os.environ.get("MAILROOM_TEST_DATABASE_URL", DEFAULT_PG), "mailroom_test"
                )
            )
        except Exception as exc:  # noqa: BLE001 - any connection failure means "missing"
            service_missing("PostgreSQL", str(exc).splitlines()[0])
        open_store(url).dispose()
        yield url


# Seconds a test's background work gets, after the test, to give its connections back.
CHECKIN_WAIT = 30.0


class CheckoutLog:
    """Which connections of an engine are checked out, and where that happened."""

    def __init__(self, engine: Engine) -> None:
        self._out: dict[int, tuple[str, Any]] = {}
        self._lock = threading.Lock()
        event.listen(engine, "checkout", self._checked_out)
        event.listen(engine, "checkin", self._checked_in)

    def _checked_out(self, dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        where = _caller(sys._getframe(1))
        with self._lock:
            self._out[id(record)] = (where, dbapi_connection)

    def _checked_in(self, _dbapi_connection: Any, record: Any) -> None:
        with self._lock:
            self._out.pop(id(record), None)

    def wait_until_all_in(self, timeout: float) -> list[str]:
        """Wait for every connection to come back; where the ones still out were taken.

        Those are closed here, so they cannot warn in a later test.
        """
        deadline = time.monotonic() + timeout
        while self._out and time.monotonic() < deadline:
            time.sleep(0.01)
        with self._lock:
            left, self._out = list(self._out.values()), {}
        for _, dbapi_connection in left:
            dbapi_connection.close()
        return [where for where, _ in left]


_OURS = (str(ROOT / "src"), str(ROOT / "tests"))


def _caller(frame: FrameType | None) -> str:
    """The thread and the innermost project frames (src/ or tests/) from ``frame`` outwards."""
    ours: list[str] = []
    while frame is not None and len(ours) < 4:
        code = frame.f_code
        if code.co_filename.startswith(_OURS):
            where = Path(code.co_filename).relative_to(ROOT)
            ours.append(f"{where}:{frame.f_lineno} {code.co_name}")
        frame = frame.f_back
    return f"in thread {threading.current_thread().name!r} at {' <- '.join(ours) or '?'}"


def _truncate_all(store: Store) -> None:
    names = ", ".join(f'"{t.name}"' for t in Base.metadata.sorted_tables)
    with store.engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {names}, message_search RESTART IDENTITY CASCADE"))


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A freshly migrated, empty store — once on SQLite and once on PostgreSQL.

    At the end every connection the test checked out must be back in the pool
    (background work gets ``CHECKIN_WAIT`` seconds to finish): one still out
    is closed and reported with where it was checked out (the test fails under
    MAILROOM_TEST_STRICT_CHECKIN=1), instead of surfacing later as a
    ResourceWarning in whichever test the garbage collector runs in.
    """
    if request.param == "sqlite":
        template = request.getfixturevalue("sqlite_template")
        path = tmp_path / "store.sqlite3"
        shutil.copy(template, path)
        opened = open_store(f"sqlite:///{path}", tmp_path, migrate=False)
    else:
        url = request.getfixturevalue("postgres_url")
        opened = open_store(url, tmp_path, migrate=False)
        _truncate_all(opened)
    checkouts = CheckoutLog(opened.engine)
    yield opened
    left = checkouts.wait_until_all_in(CHECKIN_WAIT)
    opened.dispose()
    if left:
        message = (
            f"{len(left)} database connection(s) of this test were never given back "
            f"(checked out {'; '.join(left)})."
        )
        # Closed above, so they cannot warn later. Failing the test is opt-in until a
        # whole CI run has shown no test left one behind (MAILROOM_TEST_STRICT_CHECKIN=1).
        if os.environ.get("MAILROOM_TEST_STRICT_CHECKIN") == "1":
            pytest.fail(message, pytrace=False)
        sys.stderr.write(f"\n{request.node.nodeid}: {message}\n")


@pytest.fixture
def sample_maildir() -> Path:
    """The shipped sample corpus (a Maildir with folders)."""
    if not SAMPLES.is_dir():
        pytest.fail("samples/demo-maildir is missing from the repository")
    return SAMPLES
