"""Run Alembic migrations programmatically on a store's engine."""

from __future__ import annotations

from typing import TYPE_CHECKING

from alembic import command
from alembic.config import Config

if TYPE_CHECKING:
    from mailroom.store.engine import Store


def alembic_config(store: Store | None = None) -> Config:
    """An Alembic config pointing at the packaged migrations (and at ``store``)."""
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
    command.upgrade(alembic_config(store), revision)
