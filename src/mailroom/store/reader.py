"""Plain SQL reads, for the read commands and pages, without the ORM.

A read command (``mailroom list``, ``show``, ``search``, ``labels``) runs one
or two queries; importing SQLAlchemy and its ORM took most of a second of it.
:class:`Reader` is the one thing the read models (``mailroom.reading``) need:
run a SELECT with named parameters (``:name``, the style of both the stdlib
``sqlite3`` module and SQLAlchemy's ``text()``) and return the rows. The
same SQL then runs on both stores:

* :class:`SqliteReader` opens the SQLite file with the standard library
  only, for the embedded default store;
* :class:`SessionReader` runs the SQL in an open SQLAlchemy session, for
  PostgreSQL and for the web page, which has a session anyway.

Values come back as each driver returns them: SQLite gives timestamps and
JSON as text, PostgreSQL as objects; :func:`stamp` and :func:`json_value`
make them the same.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable
from urllib.parse import quote

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

Row = Sequence[Any]


@runtime_checkable
class Reader(Protocol):
    """Runs read-only SQL on a store."""

    dialect: str  # "sqlite" or "postgresql"

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        """Every row of one SELECT."""
        ...


class SqliteReader:
    """A SQLite store file opened with the standard library (never created)."""

    dialect = "sqlite"

    def __init__(self, path: Path) -> None:
        # mode=rw: an absent file is an error, not a new empty store.
        self.connection = sqlite3.connect(
            f"file:{quote(str(path))}?mode=rw", uri=True, isolation_level=None
        )
        self.connection.execute("PRAGMA busy_timeout=30000")

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        """Every row of one SELECT."""
        return self.connection.execute(sql, dict(params or {})).fetchall()

    def close(self) -> None:
        """Close the file."""
        self.connection.close()


class SessionReader:
    """The same SQL in an open SQLAlchemy session (PostgreSQL, the web page)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.dialect = session.get_bind().dialect.name

    def rows(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Row]:
        """Every row of one SELECT."""
        from sqlalchemy import text

        return list(self.session.execute(text(sql), dict(params or {})).all())


def as_reader(source: Reader | Session) -> Reader:
    """A reader for ``source``: itself, or the SQL run in that SQLAlchemy session."""
    return source if isinstance(source, Reader) else SessionReader(source)


def in_list(name: str, values: Iterable[Any]) -> tuple[str, dict[str, Any]]:
    """``(:name0, :name1, ...)`` and its parameters: an IN list both drivers take."""
    params = {f"{name}{index}": value for index, value in enumerate(values)}
    return "(" + ", ".join(f":{key}" for key in params) + ")", params


def stamp(value: Any) -> datetime | None:
    """A stored timestamp as an aware UTC datetime (SQLite keeps naive UTC text)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    assert isinstance(value, datetime)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def required_stamp(value: Any) -> datetime:
    """A NOT NULL timestamp column's value as an aware UTC datetime (:func:`stamp`)."""
    moment = stamp(value)
    if moment is None:
        raise ValueError("A timestamp the store keeps NOT NULL was read as NULL.")
    return moment


def time_parameter(dialect: str, moment: datetime) -> Any:
    """``moment`` as a parameter compared with a stored timestamp of that store.

    SQLite keeps naive UTC text with microseconds (as SQLAlchemy writes it), so the
    comparison is of text in that form; PostgreSQL compares the aware datetime.
    """
    utc = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    return utc.strftime("%Y-%m-%d %H:%M:%S.%f") if dialect == "sqlite" else utc


def json_value(value: Any) -> Any:
    """A stored JSON column as Python (SQLite returns the text, PostgreSQL the object)."""
    return json.loads(value) if isinstance(value, str | bytes) else value
