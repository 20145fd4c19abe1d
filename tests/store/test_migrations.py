"""Schema only through Alembic: the migrations match the models and roll back cleanly."""

from __future__ import annotations

from alembic import command

from mailroom.store.engine import Store
from mailroom.store.migrate import alembic_config


def test_models_match_migrations(store: Store) -> None:
    """`alembic check` finds nothing the models have that the migrations lack."""
    command.check(alembic_config(store))


def test_downgrade_to_base_and_upgrade_again(store: Store) -> None:
    """Every migration can be undone and redone on both stores."""
    config = alembic_config(store)
    command.downgrade(config, "base")
    command.upgrade(config, "head")
    command.check(config)
