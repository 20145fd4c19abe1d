"""Reading the audit log, newest first, for ``mailroom audit``.

Plain SQL through a :class:`~mailroom.store.reader.Reader` (or the same SQL in a
session), so ``mailroom audit`` starts without SQLAlchemy or the ORM, as the
other read commands do.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mailroom.store.reader import Reader, as_reader, required_stamp, time_parameter

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


@dataclass(frozen=True)
class Entry:
    """One row of the audit log as ``mailroom audit`` shows it."""

    at: datetime
    action: str
    user_name: str | None
    via: str
    origin: str | None
    detail: str


def entries(
    source: Reader | Session,
    *,
    user: str | None = None,
    since: datetime | None = None,
    limit: int = 100,
) -> list[Entry]:
    """The newest ``limit`` rows, optionally only about ``user`` and at or after ``since``."""
    reader = as_reader(source)
    conditions: list[str] = []
    params: dict[str, Any] = {"limit": limit}
    if user is not None:
        conditions.append("user_name = :user")
        params["user"] = user
    if since is not None:
        conditions.append("at >= :since")
        params["since"] = time_parameter(reader.dialect, since)
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    rows = reader.rows(
        f"SELECT at, action, user_name, via, origin, detail FROM audit_log{where} "
        "ORDER BY at DESC, id DESC LIMIT :limit",
        params,
    )
    found = []
    for at, action, user_name, via, origin, detail in rows:
        found.append(Entry(required_stamp(at), action, user_name, via, origin, detail or ""))
    return found
