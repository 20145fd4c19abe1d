"""PostgreSQL plans each statement for its own values, also once psycopg has prepared it."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from mailroom.store.engine import Store


def test_every_connection_plans_for_its_parameters(store: Store) -> None:
    if store.dialect != "postgresql":
        pytest.skip("plan_cache_mode is PostgreSQL's; SQLite plans every statement anew")
    # Two connections at once: the setting is made on each new connection, not once.
    with store.engine.connect() as first, store.engine.connect() as second:
        for conn in (first, second):
            assert conn.execute(text("SHOW plan_cache_mode")).scalar() == "force_custom_plan"
    with store.session() as session:  # and sessions work as before
        assert session.execute(text("SELECT 1")).scalar() == 1
