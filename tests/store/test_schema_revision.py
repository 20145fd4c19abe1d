"""The revision a store's schema is at, as commands and backups read it without Alembic."""

from __future__ import annotations

import subprocess
import sys

from alembic import command

from mailroom.cli.context import head_revision
from mailroom.store.engine import Store
from mailroom.store.migrate import alembic_config, schema_revision


def test_the_revision_follows_the_migrations_down_and_up(store: Store) -> None:
    """Head after migrating, the one before after a step down, None at base (not a store)."""
    head = head_revision()
    assert head is not None and schema_revision(store) == head
    config = alembic_config(store)
    command.downgrade(config, "-1")
    below = schema_revision(store)
    assert below is not None and below != head
    command.downgrade(config, "base")
    assert schema_revision(store) is None
    command.upgrade(config, "head")
    assert schema_revision(store) == head


def test_reading_the_revision_loads_no_alembic() -> None:
    """The module that reads the revision imports Alembic only to run it."""
    code = "import sys, mailroom.store.migrate; print('alembic' in sys.modules)"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert loaded.stdout.strip() == "False", loaded.stderr
