"""The audit log's retention: the hourly maintenance job deletes old rows, never rewrites one."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError

from mailroom.config import Settings, load_settings
from mailroom.jobs.queues import make_queues
from mailroom.jobs.tasks import Jobs
from mailroom.store.engine import Store
from mailroom.store.models import AuditEntry

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
AGES = {"ancient": 400, "last-year": 366, "within": 364, "today": 0}  # days before NOW


def _fill(store: Store) -> None:
    """One row per age (rows are inserted with their time: an UPDATE is refused)."""
    with store.session() as session:
        for name, days in AGES.items():
            session.add(
                AuditEntry(
                    at=NOW - timedelta(days=days),
                    action="token.create",
                    user_name="alice",
                    via="cli",
                    origin="ops@host",
                    detail=name,
                )
            )


def _details(store: Store) -> list[str]:
    with store.session() as session:
        return list(session.scalars(select(AuditEntry.detail).order_by(AuditEntry.id)))


def _jobs(store: Store, tmp_path: Path, settings: Settings) -> Jobs:
    return Jobs(store, make_queues(settings), settings, now=lambda: NOW)


def test_the_maintenance_job_deletes_rows_past_the_retention(store: Store, tmp_path: Path) -> None:
    """By default a year is kept; the job that prunes the change log deletes what is older,
    and the trigger still refuses to rewrite what is left."""
    _fill(store)
    jobs = _jobs(store, tmp_path, Settings(data_dir=tmp_path))
    jobs.run_prune_changelog()
    assert _details(store) == ["within", "today"]
    assert jobs.run_prune_audit_log() == 0  # nothing more to delete
    refused = pytest.raises(DBAPIError, match="audit_log rows are never updated")
    with refused, store.session() as session:
        session.execute(text("UPDATE audit_log SET detail = 'rewritten'"))
    assert _details(store) == ["within", "today"]


def test_a_shorter_retention_deletes_more_and_zero_keeps_everything(
    store: Store, tmp_path: Path
) -> None:
    """Thirty days keep only today's row; 0 keeps every row, however old."""
    _fill(store)
    kept = _jobs(store, tmp_path, Settings(data_dir=tmp_path, audit_retention_days=0))
    assert kept.run_prune_audit_log() == 0
    assert _details(store) == list(AGES)
    short = _jobs(store, tmp_path, Settings(data_dir=tmp_path, audit_retention_days=30))
    assert short.run_prune_audit_log() == 3
    assert _details(store) == ["today"]


def test_the_retention_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """MAILROOM_AUDIT_RETENTION_DAYS sets it; 365 without it."""
    monkeypatch.chdir(tmp_path)  # no ./.env of the checkout
    monkeypatch.delenv("MAILROOM_AUDIT_RETENTION_DAYS", raising=False)
    assert load_settings().audit_retention_days == 365
    monkeypatch.setenv("MAILROOM_AUDIT_RETENTION_DAYS", "0")
    assert load_settings().audit_retention_days == 0
