"""The queues, on huey: durable SQLite storage embedded, Redis at scale.

One huey instance per queue name, so a worker can be told which queues to
serve (``mailroom worker --queues ingest,propagate``) and a long import never
blocks new mail. Embedded (no ``MAILROOM_REDIS_URL``): every queue lives in
``queues.sqlite3`` in the data dir, next to the store. At scale: the same
names in Redis, shared by every machine.
"""

from __future__ import annotations

from pathlib import Path

from huey import Huey, RedisHuey, SqliteHuey

from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.store.files import private_dir, private_file

QUEUES = (
    "ingest",  # sync: new mail only
    "ingest_backlog",  # import pages, one page per job
    "enrich_live",  # follow-up for mail of accounts that finished importing
    "enrich",  # follow-up for recent mail of importing accounts
    "enrich_backlog",  # follow-up for old mail
    "release",  # delayed releases of held mail (assistant)
    "propagate",  # pending changes → providers
    # Outgoing mail, one queue per lane (mailroom.outbound.lanes): the queue is the pace.
    "send_urgent",
    "send_calm",
    "send_direct",
    "webhooks",  # signed webhooks to outside systems (mailroom.webhooks)
)


def make_queues(settings: Settings, names: tuple[str, ...] = QUEUES) -> dict[str, Huey]:
    """One huey per queue name, on Redis when configured, else SQLite in the data dir."""
    from mailroom.metrics.jobs import instrument  # not at import: read commands skip it

    _check_names(names)
    queues: dict[str, Huey] = {}
    for name in names:
        if settings.redis_url:
            queues[name] = RedisHuey(
                f"{settings.namespace}-{name}", url=settings.redis_url, results=False
            )
        else:
            # Private like the store (see mailroom.store.files): jobs name accounts and messages.
            path: Path = private_dir(settings.data_dir) / "queues.sqlite3"
            private_file(path)
            queues[name] = SqliteHuey(
                f"{settings.namespace}-{name}", filename=str(path), results=False
            )
    for name, queue in queues.items():
        instrument(name, queue)  # task ids carry their enqueue time; jobs counted
    return queues


def parse_queue_list(text: str) -> tuple[str, ...]:
    """``"ingest, propagate"`` → ``("ingest", "propagate")``; ``all`` means every queue.

    Raises :class:`ConfigError` for a name that is not a queue, so ``mailroom worker``
    refuses a typo before it opens the store.
    """
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names or names == ("all",):
        return QUEUES
    _check_names(names)
    return names


def _check_names(names: tuple[str, ...]) -> None:
    unknown = [name for name in names if name not in QUEUES]
    if unknown:
        raise ConfigError(
            f"There is no queue called {unknown[0]!r}; the queues are {', '.join(QUEUES)}."
        )
