"""JMAP writes on a busy SQLite store: they wait for the write lock, they never fail."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from mailroom.config import Settings
from mailroom.jobs.queues import make_queues
from mailroom.jobs.tasks import Jobs
from mailroom.providers.local.importer import import_path
from mailroom.store.engine import Store, open_store
from tests.jmap.conftest import Jmap, email_id, run_server, seed

WRITES = 200


@pytest.fixture
def sqlite_store(sqlite_template: Path, tmp_path: Path) -> Iterator[Store]:
    """A migrated SQLite store of its own (the contention is SQLite's alone)."""
    path = tmp_path / "store.sqlite3"
    shutil.copy(sqlite_template, path)
    store = open_store(f"sqlite:///{path}", tmp_path, migrate=False)
    yield store
    store.dispose()


def test_email_set_never_fails_while_import_and_jobs_write(
    sqlite_store: Store, sample_maildir: Path, tmp_path: Path
) -> None:
    """200 Email/set calls over HTTP all succeed while an import and the jobs write the store."""
    store = sqlite_store
    alice = seed(store, "alice")
    settings = Settings(data_dir=tmp_path / "queues")
    jobs = Jobs(store, make_queues(settings), settings)
    stop = threading.Event()
    errors: list[BaseException] = []

    def importing() -> None:
        round_ = 0
        while not stop.is_set():
            round_ += 1
            import_path(store, sample_maildir, owner="alice", account=f"local{round_}")

    def background_jobs() -> None:
        while not stop.is_set():
            jobs.run_propagate(alice.account_id)
            jobs.run_wake_snoozed()
            jobs.run_prune_changelog()

    def guarded(work: object) -> object:
        def run() -> None:
            try:
                work()  # type: ignore[operator]
            except BaseException as exc:  # the writer's own failure fails the test too
                errors.append(exc)
                stop.set()

        return run

    workers = [
        threading.Thread(target=guarded(importing), daemon=True),
        threading.Thread(target=guarded(background_jobs), daemon=True),
    ]
    failures: list[object] = []
    server_run = run_server(store)
    server = next(server_run)
    try:
        for worker in workers:
            worker.start()
        target = email_id(alice.messages["hello"])
        with Jmap(server, alice) as client:
            for n in range(WRITES):
                result = client.call(
                    "Email/set", {"update": {target: {"keywords/$flagged": n % 2 == 0 or None}}}
                )
                if "error" in result or target not in (result.get("updated") or {}):
                    failures.append(result)
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=60)
        next(server_run, None)
    assert not errors, errors
    assert failures == [], f"{len(failures)} of {WRITES} writes failed: {failures[:3]}"
