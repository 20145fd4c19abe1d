"""/health is liveness without the store; /ready checks the database, Redis and the schema."""

from __future__ import annotations

from pathlib import Path

import httpx
from sqlalchemy import text

from mailroom.config import Settings
from mailroom.store.engine import Store, create_store_engine
from mailroom.web.app import create_app
from tests.jmap.conftest import serve

DEAD_DATABASE = "postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2"
DEAD_REDIS = "redis://127.0.0.1:1/0"


def _get(store: Store, settings: Settings, path: str) -> httpx.Response:
    server = serve(create_app(store, settings=settings))
    base = next(server)
    try:
        return httpx.get(f"{base}{path}", timeout=30)
    finally:
        server.close()


def test_health_answers_while_the_database_is_down(tmp_path: Path) -> None:
    """/health says ok without touching the store; /ready says the database does not answer."""
    store = Store(create_store_engine(DEAD_DATABASE))
    settings = Settings(data_dir=tmp_path)
    try:
        assert _get(store, settings, "/health").json() == {"status": "ok"}
        answer = _get(store, settings, "/ready")
    finally:
        store.dispose()
    assert answer.status_code == 503
    assert answer.json() == {"status": "not ok", "reason": "the database does not answer"}


def test_ready_on_a_migrated_store(store: Store, tmp_path: Path) -> None:
    """A migrated store and no Redis configured: /ready is ok."""
    answer = _get(store, Settings(data_dir=tmp_path), "/ready")
    assert (answer.status_code, answer.json()) == (200, {"status": "ok"})


def test_ready_refuses_when_redis_is_configured_but_down(store: Store, tmp_path: Path) -> None:
    """With MAILROOM_REDIS_URL pointing nowhere, /ready is 503 naming Redis."""
    answer = _get(store, Settings(data_dir=tmp_path, redis_url=DEAD_REDIS), "/ready")
    assert answer.status_code == 503
    assert answer.json()["reason"] == "Redis does not answer"


def test_ready_tells_a_schema_behind_from_one_ahead(store: Store, tmp_path: Path) -> None:
    """A schema stamped at an old revision needs migrations; an unknown one is a newer release."""
    settings = Settings(data_dir=tmp_path)
    with store.engine.begin() as connection:
        current = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
        connection.execute(text("UPDATE alembic_version SET version_num = '0001'"))
    try:
        behind = _get(store, settings, "/ready")
        with store.engine.begin() as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = 'f00dfeed'"))
        ahead = _get(store, settings, "/ready")
    finally:
        with store.engine.begin() as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": current})
    assert behind.status_code == 503
    assert behind.json()["reason"] == "the database needs migrations"
    assert ahead.status_code == 200
