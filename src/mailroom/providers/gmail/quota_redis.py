"""The quota pacer in Redis (server mode): two hashes per account, changed in transactions.

``<prefix><account>:usage`` maps an epoch second to the units spent in it;
``<prefix><account>:state`` holds the :class:`~.quota.QuotaState` fields.
Every operation WATCHes both keys, reads them, decides with the same pure
policy as the store (:func:`~.quota.reservation_wait`,
:meth:`~.quota.QuotaState.after_rejection`) and writes in ``MULTI``/``EXEC``;
a concurrent change by another worker aborts the ``EXEC`` and the operation
runs again on what that worker wrote. So two workers never spend the same
units, and the policy exists once.

Seconds older than the minute are deleted as they are passed; the keys also
expire (long after the clock would have pruned them) so an account that
stopped leaves nothing behind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, fields
from typing import Any, TypeVar

import redis
from redis.client import Pipeline

from mailroom.providers.gmail.quota import (
    LEARNED_LIMIT_LIFETIME,
    WINDOW_SECONDS,
    Clock,
    PacerBase,
    QuotaState,
    Sleep,
    rejection_usage,
    reservation_wait,
)

__all__ = ["RedisQuotaPacer"]

# Garbage collection only: the policy prunes by the clock it is given.
USAGE_TTL = 60 * 60
STATE_TTL = 2 * LEARNED_LIMIT_LIFETIME

T = TypeVar("T")

_INTEGER_FIELDS = {"learned_limit", "slowdowns"}


def _decode(raw: dict[bytes, bytes]) -> QuotaState:
    values: dict[str, Any] = {}
    for field in fields(QuotaState):
        text = raw.get(field.name.encode())
        if text is None or text == b"":
            continue
        values[field.name] = int(text) if field.name in _INTEGER_FIELDS else float(text)
    return QuotaState(**values)


def _encode(state: QuotaState) -> dict[str, str]:
    return {name: "" if value is None else str(value) for name, value in asdict(state).items()}


class RedisQuotaPacer(PacerBase):
    """One account's quota pacer in a Redis shared by every worker."""

    _storage_errors = (redis.RedisError,)

    def __init__(
        self,
        client: redis.Redis,
        account_id: int,
        prefix: str = "mailroom:gmail-quota:",
        clock: Clock | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        super().__init__(account_id, clock, sleep)
        self.client = client
        self.usage_key = f"{prefix}{account_id}:usage"
        self.state_key = f"{prefix}{account_id}:state"

    def _atomically(self, attempt: Callable[[Pipeline], T]) -> T:
        """Run ``attempt`` (reads, then ``multi()`` and writes) until no other worker interfered."""
        with self.client.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(self.usage_key, self.state_key)  # type: ignore[no-untyped-call]
                    result = attempt(pipe)
                    pipe.execute()
                    return result
                except redis.WatchError:
                    continue

    def _read(self, pipe: Pipeline, now: float) -> tuple[QuotaState, dict[int, int], list[bytes]]:
        """The state, the live usage per second and the fields of seconds that have passed."""
        raw_usage: dict[bytes, bytes] = pipe.hgetall(self.usage_key)  # type: ignore[assignment]
        raw_state: dict[bytes, bytes] = pipe.hgetall(self.state_key)  # type: ignore[assignment]
        usage: dict[int, int] = {}
        passed: list[bytes] = []
        for key, value in raw_usage.items():
            if int(key) + WINDOW_SECONDS > now:
                usage[int(key)] = int(value)
            else:
                passed.append(key)
        return _decode(raw_state), usage, passed

    def _reserve_at(self, now: float, units: int) -> float:
        def attempt(pipe: Pipeline) -> float:
            state, usage, passed = self._read(pipe, now)
            wait = reservation_wait(state, usage, units, now)
            pipe.multi()
            if passed:
                pipe.hdel(self.usage_key, *passed)
            if wait == 0 and units > 0:
                pipe.hincrby(self.usage_key, str(int(now)), units)
                pipe.expire(self.usage_key, USAGE_TTL)
            return wait

        return self._atomically(attempt)

    def _reject_at(self, now: float, units: int, stated_limit: int | None) -> QuotaState:
        def attempt(pipe: Pipeline) -> QuotaState:
            state, usage, _ = self._read(pipe, now)
            after = state.after_rejection(now, rejection_usage(usage, units, now), stated_limit)
            pipe.multi()
            pipe.hset(self.state_key, mapping=_encode(after))  # type: ignore[arg-type]
            pipe.expire(self.state_key, STATE_TTL)
            return after

        return self._atomically(attempt)

    def _state(self) -> QuotaState:
        raw: dict[bytes, bytes] = self.client.hgetall(self.state_key)  # type: ignore[assignment]
        return _decode(raw)

    def close(self) -> None:
        """Close the Redis connections."""
        self.client.close()
