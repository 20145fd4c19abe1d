"""Whether this process can do its work: the database, Redis, and the schema.

``/ready`` asks :func:`readiness` and answers 200 or 503 with a short reason,
nothing more (it is open to anyone, like ``/health``):

* the database answers a query;
* when ``MAILROOM_REDIS_URL`` is set, Redis answers ``PING`` (queues and
  leases live there);
* the schema is at the newest migration this program knows. A database
  *ahead* of the program (another machine already ran a newer release's
  migrations) counts as ready: migrations only add while old processes run
  (docs/operations.md, upgrades), so the old code still works until it is
  replaced; a database *behind* it does not, since the code would ask for
  tables or columns that are not there yet.

Every check has a short timeout, so a load balancer's probe is never stuck
behind a dead host for long.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from mailroom.config import Settings
from mailroom.store.engine import Store

REDIS_TIMEOUT = 2.0  # seconds


@dataclass(frozen=True)
class Readiness:
    """The answer: ok, or not with the reason."""

    ok: bool
    reason: str = ""


@functools.cache
def _revisions() -> tuple[frozenset[str], frozenset[str]]:
    """(the heads, every revision) of the migrations shipped with this program."""
    from alembic.script import ScriptDirectory

    from mailroom.store.migrate import alembic_config

    script = ScriptDirectory.from_config(alembic_config())
    known = frozenset(rev.revision for rev in script.walk_revisions())
    return frozenset(script.get_heads()), known


def schema_state(store: Store) -> str:
    """``current``, ``ahead`` (a newer program migrated it) or ``behind``."""
    heads, known = _revisions()
    with store.engine.connect() as connection:
        rows = connection.execute(text("SELECT version_num FROM alembic_version")).scalars()
        stamped = frozenset(str(row) for row in rows)
    if stamped == heads:
        return "current"
    if stamped and not stamped <= known:
        return "ahead"
    return "behind"


def readiness(store: Store, settings: Settings) -> Readiness:
    """Check the database, Redis (when configured) and the schema, in that order."""
    try:
        state = schema_state(store)
    except SQLAlchemyError:
        return Readiness(False, "the database does not answer")
    if settings.redis_url:
        import redis

        client = redis.Redis.from_url(
            settings.redis_url,
            socket_timeout=REDIS_TIMEOUT,
            socket_connect_timeout=REDIS_TIMEOUT,
        )
        try:
            client.ping()
        except redis.RedisError:
            return Readiness(False, "Redis does not answer")
        finally:
            client.close()
    if state == "behind":
        return Readiness(False, "the database needs migrations")
    return Readiness(True)
