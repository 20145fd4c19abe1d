"""Alembic environment: runs migrations on the engine handed in by mailroom."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from mailroom.store.models import Base

config = context.config
target_metadata = Base.metadata


def include_object(
    obj: object, name: str | None, type_: str, reflected: bool, compare_to: object
) -> bool:
    """Leave the search tables (FTS5 shadow tables, tsvector) to hand-written migrations."""
    return not (type_ == "table" and name is not None and name.startswith("message_search"))


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
        )
        context.run_migrations()


run_migrations_online()
