"""What the provider import benchmarks share: a fresh PostgreSQL database, a count."""

from __future__ import annotations

import subprocess

from sqlalchemy import func, select

from mailroom.store.engine import Store
from mailroom.store.models import Message


def store_count(store: Store, account_id: int) -> int:
    """Messages stored for the account."""
    with store.session() as session:
        return int(
            session.scalar(select(func.count(Message.id)).where(Message.account_id == account_id))
            or 0
        )


def fresh_postgres(url: str) -> str:
    """Drop and create the database ``url`` names (a benchmark's own, never ``test``)."""
    name = url.rsplit("/", 1)[1]
    if name in ("test", "postgres"):
        raise SystemExit(f"give the benchmark a database of its own, not {name!r}")
    base = url.rsplit("/", 1)[0].replace("postgresql+psycopg://", "postgresql://")
    for sql in (f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}"'):
        subprocess.run(["psql", f"{base}/postgres", "-qc", sql], check=True)
    return url
