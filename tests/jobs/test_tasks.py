"""Tasks on real (SQLite-backed) huey queues, driven one job at a time."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mailroom.config import Settings
from mailroom.ingest.routing import queue_for
from mailroom.jobs.queues import make_queues
from mailroom.jobs.tasks import Jobs
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.providers import registry
from mailroom.providers.base import ImportState
from mailroom.store.engine import Store
from tests.helpers import drain

PAGES = 3


class PagedImporter:
    """An importer with a fixed number of pages per account; records the order of pages."""

    calls: list[int] = []
    done: dict[int, int] = {}

    def __init__(self, store: Store, settings: Settings | None = None) -> None:
        self.store = store

    def import_page(self, account_id: int) -> bool:
        self.calls.append(account_id)
        self.done[account_id] = self.done.get(account_id, 0) + 1
        return self.done[account_id] < PAGES

    def state(self, account_id: int) -> ImportState:
        done = self.done.get(account_id, 0)
        return ImportState(importing=done < PAGES, done=done, total=PAGES)

    def close(self) -> None:
        """Nothing is held between pages."""


@pytest.fixture
def paged_provider() -> Iterator[None]:
    """Register the paged importer as provider "paged" for one test."""
    PagedImporter.calls, PagedImporter.done = [], {}
    registry.register(registry.ProviderEntry("paged", importer=PagedImporter))
    yield
    registry.unregister("paged")


def test_import_pages_of_accounts_interleave(
    store: Store, tmp_path: Path, paged_provider: None
) -> None:
    """One job is one page; the next page goes to the back, so accounts take turns."""
    with store.session() as session:
        user = get_or_create_user(session)
        a = get_or_create_account(session, user, "a", "paged").id
        b = get_or_create_account(session, user, "b", "paged").id
    jobs = Jobs(store, make_queues(Settings(data_dir=tmp_path)))
    jobs.import_page(a)
    jobs.import_page(b)
    assert drain(jobs.queues["ingest_backlog"]) == 2 * PAGES
    assert PagedImporter.calls == [a, b, a, b, a, b]


def test_stalled_import_is_restarted_only_after_five_silent_minutes(
    store: Store, tmp_path: Path, paged_provider: None
) -> None:
    """A sync restarts an import with work left once it has been silent for 5 minutes."""
    clock = [datetime(2030, 1, 1, tzinfo=UTC)]
    with store.session() as session:
        user = get_or_create_user(session)
        a = get_or_create_account(session, user, "a", "paged").id
    jobs = Jobs(store, make_queues(Settings(data_dir=tmp_path)), now=lambda: clock[0])
    assert jobs.restart_stalled_import(a)  # never started: restart at once
    assert not jobs.restart_stalled_import(a)  # just stamped
    clock[0] += timedelta(minutes=4)
    assert not jobs.restart_stalled_import(a)
    clock[0] += timedelta(minutes=2)
    assert jobs.restart_stalled_import(a)
    PagedImporter.done[a] = PAGES
    clock[0] += timedelta(minutes=10)
    assert not jobs.restart_stalled_import(a)  # finished: nothing to restart


def test_follow_up_routing_by_mail_age_and_import_state() -> None:
    """Finished accounts go live; importing accounts split recent and backlog at 30 days."""
    now = datetime(2030, 1, 31, tzinfo=UTC)
    assert queue_for(True, now - timedelta(days=400), now) == "enrich_live"
    assert queue_for(False, now - timedelta(days=29), now) == "enrich"
    assert queue_for(False, now - timedelta(days=31), now) == "enrich_backlog"


def test_unknown_queue_name_is_a_plain_error(tmp_path: Path) -> None:
    """Asking for a queue that does not exist names the real ones."""
    from mailroom.errors import ConfigError

    with pytest.raises(ConfigError, match="no queue called 'fast'"):
        make_queues(Settings(data_dir=tmp_path), ("fast",))


def test_change_log_retention_prunes_old_rows(store: Store, tmp_path: Path) -> None:
    """The retention task drops change rows older than the configured days (keeping the newest)."""
    from sqlalchemy import func, select, update

    from mailroom.store import changelog
    from mailroom.store.models import Change

    with store.session() as session:
        user = get_or_create_user(session)
        changelog.record(session, user.id, "Email", [1, 2, 3], "created")
        session.flush()
        session.execute(update(Change).values(created_at=datetime(2020, 1, 1, tzinfo=UTC)))
        changelog.record(session, user.id, "Email", [4], "updated")
    jobs = Jobs(
        store,
        make_queues(Settings(data_dir=tmp_path)),
        Settings(data_dir=tmp_path, changelog_retention_days=30),
    )
    assert jobs.run_prune_changelog() == 3
    with store.session() as session:
        assert session.scalar(select(func.count()).select_from(Change)) == 1
