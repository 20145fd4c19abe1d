"""What the provider import benchmarks share: a fresh PostgreSQL database, a count, runs."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
from collections.abc import Callable, Iterable
from typing import Any

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


def repeat_runs(
    args: argparse.Namespace,
    one_run: Callable[[argparse.Namespace, str | None], dict[str, Any]],
    median_keys: Iterable[str],
) -> None:
    """Run ``one_run`` ``args.repeat`` times (each on a fresh database when
    ``args.database_url`` names one), print each result and then the medians of
    ``median_keys`` over the runs that have a value."""
    runs = []
    for _ in range(args.repeat):
        url = fresh_postgres(args.database_url) if args.database_url else None
        result = one_run(args, url)
        print(json.dumps(result), flush=True)
        runs.append(result)
    medians = {
        key: statistics.median(float(r[key]) for r in runs if r[key] is not None)
        for key in median_keys
        if any(r[key] is not None for r in runs)
    }
    print(json.dumps({"median": medians, "runs": len(runs)}), flush=True)
