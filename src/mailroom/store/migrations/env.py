"""Alembic environment: runs migrations on the engine handed in by mailroom."""

from __future__ import annotations

from alembic import context
from sqlalchemy import String, create_engine
from sqlalchemy.types import TypeEngine

from mailroom.store.models import Base

config = context.config
target_metadata = Base.metadata


def include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """Leave the search tables (FTS5 shadow tables, tsvector) to hand-written migrations."""
    return not (type_ == "table" and name is not None and name.startswith("message_search"))


def compare_type(
    context: object,
    inspected: object,
    metadata: object,
    inspected_type: TypeEngine[object],
    metadata_type: TypeEngine[object],
) -> bool | None:
    """On SQLite, ``VARCHAR(n)`` and ``TEXT`` are the same type; elsewhere Alembic decides.

    SQLite ignores the length and gives both TEXT affinity, so migration 0007
    widens columns on PostgreSQL only and the check must not ask SQLite for a
    table rebuild that would change nothing.
    """
    dialect = getattr(getattr(context, "dialect", None), "name", None)
    if dialect == "sqlite" and isinstance(inspected_type, String):
        return not isinstance(metadata_type, String)
    return None


def run_migrations_online() -> None:
    """Run migrations with a connection from the given engine (or the configured URL)."""
    engine = config.attributes.get("engine") or create_engine(
        config.get_main_option("sqlalchemy.url") or "sqlite://"
    )
    with engine.begin() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=connection.dialect.name == "sqlite",
            include_object=include_object,
            compare_type=compare_type,
        )
        context.run_migrations()


run_migrations_online()
