"""Alembic environment: runs migrations on the engine handed in by mailroom."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from mailroom.store.models import Base

config = context.config
target_metadata = Base.metadata


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
        )
        context.run_migrations()


run_migrations_online()
