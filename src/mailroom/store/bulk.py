"""Fast bulk writes through Core executemany (the ingest hot path).

SQLAlchemy compiles one statement and batches the rows ("insertmanyvalues"),
instead of compiling a VALUES list per batch or tracking ORM state — the
difference is most of the ingest time on small messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import Table, bindparam, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from mailroom.store.models import Base


def _table(model: type[Base]) -> Table:
    return cast(Table, model.__table__)


def insert_ignoring_conflicts(
    session: Session,
    model: type[Base],
    rows: Sequence[dict[str, Any]],
    conflict: Sequence[str] | None = None,
    returning: Sequence[str] = (),
) -> list[tuple[Any, ...]]:
    """INSERT … ON CONFLICT DO NOTHING for many rows; returns the RETURNING rows of new ones."""
    if not rows:
        return []
    table = _table(model)
    dialect = session.get_bind().dialect.name
    statement = (sqlite if dialect == "sqlite" else postgresql).insert(table)
    statement = statement.on_conflict_do_nothing(index_elements=conflict)
    connection = session.connection()
    if returning:
        columns = [table.c[name] for name in returning]
        return [tuple(row) for row in connection.execute(statement.returning(*columns), list(rows))]
    connection.execute(statement, list(rows))
    return []


def insert_rows(session: Session, model: type[Base], rows: Sequence[dict[str, Any]]) -> None:
    """A plain INSERT of many rows."""
    if rows:
        session.connection().execute(_table(model).insert(), list(rows))


def update_by_id(session: Session, model: type[Base], rows: Sequence[dict[str, Any]]) -> None:
    """UPDATE … SET … WHERE id = row["id"] for many rows with the same columns."""
    if not rows:
        return
    table = _table(model)
    columns = [name for name in rows[0] if name != "id"]
    statement = (
        update(table)
        .where(table.c.id == bindparam("_id"))
        .values({name: bindparam(name) for name in columns})
    )
    session.connection().execute(
        statement, [{"_id": row["id"], **{n: row[n] for n in columns}} for row in rows]
    )


def insert_or_get(
    session: Session, model: type[Base], values: dict[str, Any], keys: Sequence[str]
) -> tuple[int, bool]:
    """(id, created) of the row whose unique ``keys`` match ``values``, inserting it if missing.

    Must be idempotent under concurrency: ``INSERT … ON CONFLICT DO NOTHING``
    waits for a concurrent insert of the same key to commit and then does
    nothing, and the select that follows finds the winner's row — so two
    processes creating the same row both get its id, and neither an
    IntegrityError (no read-before-insert race).
    """
    table = _table(model)
    inserted = insert_ignoring_conflicts(session, model, [values], keys, ("id",))
    if inserted:
        return int(inserted[0][0]), True
    found = session.connection().execute(
        select(table.c.id).where(*(table.c[key] == values[key] for key in keys))
    )
    return int(found.scalar_one()), False
