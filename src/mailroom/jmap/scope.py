"""Scoping look-ups by id to the asking user without misleading SQLite's planner.

Every look-up of objects by id also checks the owner. Written plainly
(``id IN (...) AND user_id = ?``), SQLite without table statistics prefers
the ``(user_id, ...)`` index and scans all of the user's rows instead of
fetching the few ids by primary key — 4 ms instead of 0.05 ms for 50 emails
on 30,000 messages. ``user_id + 0`` is the same test, but no index matches
it, so the primary key (or the thread index) drives the query. PostgreSQL
plans it just as well.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement


def owned_by(user_column: Any, user_id: int) -> ColumnElement[bool]:
    """``user_column`` equals ``user_id``, as a filter that never picks the user index."""
    condition: ColumnElement[bool] = (user_column + 0) == user_id
    return condition
