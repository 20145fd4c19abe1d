"""How long the audit log keeps its rows: older ones are deleted, never rewritten.

``MAILROOM_AUDIT_RETENTION_DAYS`` (365; 0 keeps every row) is applied by the
hourly maintenance job that also prunes the change log
(:meth:`mailroom.jobs.tasks.Jobs.run_prune_changelog`). The trigger of
migration 0018 refuses an UPDATE of a row; a DELETE of old rows it lets pass.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlalchemy.orm import Session

from mailroom.store.models.audit import AuditEntry


def audit_cutoff(now: datetime, retention_days: int) -> datetime | None:
    """The time before which rows go; None when the log is kept forever (0 days)."""
    return now - timedelta(days=retention_days) if retention_days > 0 else None


def prune_audit_log(session: Session, older_than: datetime) -> int:
    """Delete the audit rows recorded before ``older_than``; how many."""
    result = session.execute(delete(AuditEntry).where(AuditEntry.at < older_than))
    return int(getattr(result, "rowcount", 0) or 0)
