"""The pace of the throttled lanes: one token bucket per lane, shared by every worker.

A lane's bucket holds at most ``burst`` tokens and gains ``per_minute / 60``
tokens a second (``MAILROOM_LANE_RATES``). Handing one message to a server
takes one token; a worker claiming a batch asks for as many as it has due mail
(:meth:`Pace.take_up_to`) and gives back what it did not hand over. When the
bucket is empty, the take says how many seconds until the next token, and
the message waits without that counting as an attempt (SPEC §11). Only
``urgent`` and ``calm`` have buckets: ``direct`` is never throttled, and nor
is any lane when pacing is switched off (:func:`throttled`).

The bucket must be one for all workers of all machines, so it lives outside
any process:

* :class:`StorePace` (embedded mode): a ``send_rate_buckets`` row per lane.
  Each take is one short transaction that writes first (``INSERT … ON
  CONFLICT DO NOTHING`` creates the row full), which on SQLite takes the write
  lock (``BEGIN IMMEDIATE``) before the row is read, and on PostgreSQL reads
  the row ``FOR UPDATE``: two workers never spend the same token.
* :class:`RedisPace` (``MAILROOM_REDIS_URL``): the same arithmetic in one Lua
  script, atomic in Redis.

Both take the moment from the caller (the sender's clock), so the pace can be
tested without waiting; a clock that goes backwards refills nothing.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Protocol

import redis
from sqlalchemy import select

from mailroom.config import LaneRate, Settings
from mailroom.outbound.lanes import DIRECT
from mailroom.store.bulk import insert_ignoring_conflicts
from mailroom.store.engine import Store
from mailroom.store.models import SendRateBucket

__all__ = ["Pace", "RedisPace", "StorePace", "grant", "pace_for", "refill", "throttled"]


def throttled(lane: str, settings: Settings) -> bool:
    """Whether ``lane`` is paced (and so retries by time, not by attempts): SPEC §11."""
    return settings.pacing_enabled and lane != DIRECT


def refill(
    tokens: float, refreshed_at: float, now: float, rate: LaneRate, cost: float
) -> tuple[float, float, float]:
    """``(tokens left, refreshed at, seconds to wait)`` after taking ``cost`` tokens at ``now``.

    A negative ``cost`` gives tokens back. Nothing is taken when the bucket
    holds fewer than ``cost``: the wait says when it will (times in seconds).
    """
    per_second = rate.per_minute / 60.0
    if now > refreshed_at:
        tokens = min(float(rate.burst), tokens + (now - refreshed_at) * per_second)
        refreshed_at = now
    if cost <= 0:
        return min(float(rate.burst), tokens - cost), refreshed_at, 0.0
    if tokens >= cost:
        return tokens - cost, refreshed_at, 0.0
    return tokens, refreshed_at, (cost - tokens) / per_second


def grant(
    tokens: float, refreshed_at: float, now: float, rate: LaneRate, want: int
) -> tuple[float, float, int, float]:
    """``(tokens left, refreshed at, granted, seconds to wait)`` for up to ``want`` whole tokens.

    A negative ``want`` gives tokens back. The wait (until the next token) is
    only given when none was granted.
    """
    tokens, refreshed_at, _ = refill(tokens, refreshed_at, now, rate, 0.0)
    if want <= 0:
        return min(float(rate.burst), tokens - want), refreshed_at, 0, 0.0
    granted = min(want, math.floor(tokens))
    wait = 0.0 if granted else (1.0 - tokens) / (rate.per_minute / 60.0)
    return tokens - granted, refreshed_at, granted, wait


class Pace(Protocol):
    """The shared buckets of the throttled lanes."""

    def take(self, lane: str, now: datetime) -> float:
        """Take one token of ``lane``: 0.0 when taken, else the seconds until one is there."""
        ...

    def take_up_to(self, lane: str, now: datetime, count: int) -> tuple[int, float]:
        """Take up to ``count`` tokens: how many were taken and (none taken) the wait in seconds."""
        ...

    def give_back(self, lane: str, now: datetime, count: int = 1) -> None:
        """Return tokens taken for messages that were not handed over after all."""
        ...

    def close(self) -> None:
        """Release connections; safe to call twice."""
        ...


class _Buckets:
    """Taking and giving back, on top of one ``_spend`` of the storage."""

    def _spend(self, lane: str, now: datetime, want: int) -> tuple[int, float]:
        raise NotImplementedError

    def take(self, lane: str, now: datetime) -> float:
        """Take one token of ``lane`` (see :class:`Pace`)."""
        granted, wait = self._spend(lane, now, 1)
        return 0.0 if granted else wait

    def take_up_to(self, lane: str, now: datetime, count: int) -> tuple[int, float]:
        """Take up to ``count`` tokens of ``lane`` (see :class:`Pace`)."""
        return self._spend(lane, now, count) if count > 0 else (0, 0.0)

    def give_back(self, lane: str, now: datetime, count: int = 1) -> None:
        """Return ``count`` tokens of ``lane``."""
        if count > 0:
            self._spend(lane, now, -count)


class StorePace(_Buckets):
    """Buckets in the store's ``send_rate_buckets`` table (the embedded mode)."""

    def __init__(self, store: Store, rates: dict[str, LaneRate]) -> None:
        self.store = store
        self.rates = rates

    def _spend(self, lane: str, now: datetime, want: int) -> tuple[int, float]:
        rate = self.rates[lane]
        with self.store.session() as session:
            insert_ignoring_conflicts(
                session,
                SendRateBucket,
                [{"lane": lane, "tokens": float(rate.burst), "refreshed_at": now}],
                conflict=["lane"],
            )
            row = session.scalars(
                select(SendRateBucket).where(SendRateBucket.lane == lane).with_for_update()
            ).one()
            start = row.refreshed_at.timestamp()
            tokens, refreshed, granted, wait = grant(row.tokens, start, now.timestamp(), rate, want)
            if granted or want < 0:  # a refusal changes nothing: the same refill comes next time
                row.tokens = tokens
                if refreshed > start:
                    row.refreshed_at = now
            return granted, wait

    def close(self) -> None:
        """Nothing to release: the store belongs to the caller."""


# KEYS[1] the bucket; ARGV: tokens per second, burst, now (s), want (negative: give back).
# The arithmetic of grant(); returns {granted, wait}.
_LUA = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local want = tonumber(ARGV[4])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
if now > at then
  tokens = math.min(burst, tokens + (now - at) * rate)
  at = now
end
local granted = 0
local wait = 0
if want <= 0 then
  tokens = math.min(burst, tokens - want)
else
  granted = math.min(want, math.floor(tokens))
  tokens = tokens - granted
  if granted == 0 then
    wait = (1 - tokens) / rate
  end
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(at))
redis.call('EXPIRE', KEYS[1], 86400)
return {tostring(granted), tostring(wait)}
"""


class RedisPace(_Buckets):
    """Buckets in Redis, one hash per lane, changed only by one Lua script (the scale mode)."""

    def __init__(
        self, client: redis.Redis, rates: dict[str, LaneRate], prefix: str = "mailroom:pace:"
    ) -> None:
        self.client = client
        self.rates = rates
        self.prefix = prefix
        self._script = client.register_script(_LUA)

    def _spend(self, lane: str, now: datetime, want: int) -> tuple[int, float]:
        rate = self.rates[lane]
        args = [rate.per_minute / 60.0, rate.burst, now.timestamp(), want]
        granted, wait = self._script(keys=[self.prefix + lane], args=args)
        return int(float(granted)), float(wait)

    def close(self) -> None:
        """Close the Redis connections."""
        self.client.close()


def pace_for(store: Store, settings: Settings) -> Pace:
    """Redis buckets when ``MAILROOM_REDIS_URL`` is set, else the store's."""
    rates = settings.lane_rate_map
    if settings.redis_url:
        client = redis.Redis.from_url(settings.redis_url)
        return RedisPace(client, rates, prefix=f"{settings.namespace}:pace:")
    return StorePace(store, rates)
