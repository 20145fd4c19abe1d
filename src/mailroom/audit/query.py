"""Reading the audit log, newest first, for ``mailroom audit``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.store.models.audit import AuditEntry


def entries(
    session: Session,
    *,
    user: str | None = None,
    since: datetime | None = None,
    limit: int = 100,
) -> Sequence[AuditEntry]:
    """The newest ``limit`` rows, optionally only about ``user`` and at or after ``since``."""
    query = select(AuditEntry).order_by(AuditEntry.at.desc(), AuditEntry.id.desc()).limit(limit)
    if user is not None:
        query = query.where(AuditEntry.user_name == user)
    if since is not None:
        query = query.where(AuditEntry.at >= since)
    return session.scalars(query).all()
