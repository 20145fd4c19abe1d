"""The store's schema: run Alembic migrations on its engine, read the revision it is at.

Alembic (a fifth of the start-up of a read command) is imported by the
functions that run it, never to read the revision (:func:`schema_revision`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from alembic.config import Config

    from mailroom.store.engine import Store


def alembic_config(store: Store | None = None) -> Config:
    """An Alembic config pointing at the packaged migrations (and at ``store``)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", "mailroom.store:migrations")
    if store is not None:
        config.attributes["engine"] = store.engine
        # The config is a ConfigParser: a '%' (a percent-encoded path or password) is doubled.
        url = store.engine.url.render_as_string(hide_password=False)
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(store: Store, revision: str = "head") -> None:
    """Bring the schema of ``store`` to ``revision``; safe to call on every start."""
    from alembic import command

    command.upgrade(alembic_config(store), revision)


def schema_revision(store: Store) -> str | None:
    """The Alembic revision the store is at; None when it was never migrated (not a store)."""
    from sqlalchemy import inspect, text

    with store.engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return str(version) if version is not None else None
