"""The Gmail quota pacer: a learned per-user limit, shared by every worker.

Google allows each user a number of quota units per minute and says how many
only by refusing a request (403 ``userRateLimitExceeded`` / 429
``rateLimitExceeded``). So the limit is learned, not configured (SPEC §1):

* An account starts at :data:`START_LIMIT` (15,000 units a minute, the limit
  of projects older than May 2026).
* The first rejection teaches the real limit: the one the rejection states,
  if the caller could read one, else the units the account had spent in the
  sliding minute when it was refused (without the refused request itself). A
  rejection after fewer than :data:`MIN_LEARNABLE_LIMIT` units teaches
  nothing: it is about concurrency or another client, not the minute's limit.
* Every account is paced at :data:`PACE_SHARE` (85 %) of its limit, over a
  sliding one-minute window (so no 60 seconds of any window Google uses see
  more), in requests of at most :data:`MESSAGES_PER_REQUEST` messages (Google
  refuses what spends a minute's supply in one second), counting
  :data:`UNITS_PER_FULL_MESSAGE` units per message fetched as ``full`` or
  ``raw`` (Google's table says less; 60 is what such a fetch costs).
* Each rejection at an already known limit slows the account down: the
  budget shrinks by :data:`SLOWDOWN_FACTOR` per rejection (never below
  :data:`SLOWDOWN_FLOOR` of it), and the limit drops to the usage at that
  rejection when that is lower. The slow-down ends :data:`SLOWDOWN_DURATION`
  after the last rejection.
* A learned limit is forgotten :data:`LEARNED_LIMIT_LIFETIME` (a day) after it
  was learned, so a raised limit is found again.
* A rejection is never an error: :meth:`QuotaPacer.rejected` records it and
  says how long to wait (the account's minute: :data:`WINDOW_SECONDS`), and
  every reservation of that account waits as long. The batch, import page or
  sync that met it is deferred by that time.

The usage and what was learned must be one for all workers of all machines,
so they live outside any process: in Redis in server mode
(:mod:`.quota_redis`), in the store in the embedded mode (:mod:`.quota_store`).
Both keep the usage per second and sum the last 60; the policy here is pure
(:class:`QuotaState`, :func:`wait_for_room`) and the same for both. Time is
the injected clock's, so tests never sleep.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol, TypeVar

from mailroom.metrics import catalogue
from mailroom.providers.base import TransientError

if TYPE_CHECKING:
    from mailroom.config import Settings
    from mailroom.store.engine import Store

__all__ = [
    "LEARNED_LIMIT_LIFETIME",
    "MESSAGES_PER_REQUEST",
    "MIN_LEARNABLE_LIMIT",
    "PACE_SHARE",
    "SLOWDOWN_DURATION",
    "SLOWDOWN_FACTOR",
    "SLOWDOWN_FLOOR",
    "START_LIMIT",
    "UNITS_PER_FULL_MESSAGE",
    "WINDOW_SECONDS",
    "SYSTEM_TIME",
    "Clock",
    "PacerBase",
    "QuotaPacer",
    "QuotaState",
    "Sleep",
    "TimeSource",
    "message_requests",
    "pacer_for",
    "rejection_usage",
    "reservation_wait",
    "scaled_time",
    "units_for_messages",
    "wait_for_room",
    "window_usage",
]

START_LIMIT = 15_000  # units per user and minute until Google says otherwise
PACE_SHARE = 0.85  # of the limit an account is paced at
MESSAGES_PER_REQUEST = 5  # messages fetched per request (batch part group)
UNITS_PER_FULL_MESSAGE = 60  # units one ``full`` or ``raw`` messages.get costs
WINDOW_SECONDS = 60  # the quota's minute; also how long a rejection defers
LEARNED_LIMIT_LIFETIME = 24 * 60 * 60  # seconds until a learned limit is forgotten
MIN_LEARNABLE_LIMIT = 1_000  # below any documented per-user limit (6,000 is the lowest)
SLOWDOWN_FACTOR = 0.8  # the budget's share kept per rejection at a known limit
SLOWDOWN_FLOOR = 0.25  # the smallest share of the paced budget slow-downs leave
SLOWDOWN_DURATION = 10 * 60  # seconds after the last rejection until full pace again

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
Sleep = Callable[[float], None]
T = TypeVar("T")


def units_for_messages(count: int) -> int:
    """The units fetching ``count`` messages as ``full`` or ``raw`` costs."""
    return count * UNITS_PER_FULL_MESSAGE


def message_requests(ids: Sequence[T]) -> list[list[T]]:
    """``ids`` cut into requests of at most :data:`MESSAGES_PER_REQUEST`, in order."""
    return [
        list(ids[i : i + MESSAGES_PER_REQUEST]) for i in range(0, len(ids), MESSAGES_PER_REQUEST)
    ]


@dataclass(frozen=True)
class QuotaState:
    """What is known about one account's limit; times are epoch seconds.

    Pure: every method takes the moment and returns a value or a new state.
    """

    learned_limit: int | None = None
    learned_at: float | None = None
    slowdowns: int = 0
    last_rejected_at: float | None = None
    blocked_until: float | None = None

    def known_limit(self, now: float) -> int | None:
        """The learned limit while it is less than a day old, else None."""
        if self.learned_limit is None or self.learned_at is None:
            return None
        if now - self.learned_at >= LEARNED_LIMIT_LIFETIME:
            return None
        return self.learned_limit

    def limit(self, now: float) -> int:
        """The limit in force: the learned one, or :data:`START_LIMIT`."""
        known = self.known_limit(now)
        return START_LIMIT if known is None else known

    def active_slowdowns(self, now: float) -> int:
        """How many slow-downs still apply (none once the last rejection is long enough ago)."""
        if self.last_rejected_at is None or now - self.last_rejected_at >= SLOWDOWN_DURATION:
            return 0
        return self.slowdowns

    def budget(self, now: float) -> int:
        """The units the account may spend in any sliding minute now."""
        share = max(SLOWDOWN_FLOOR, SLOWDOWN_FACTOR ** self.active_slowdowns(now))
        return max(1, math.floor(self.limit(now) * PACE_SHARE * share))

    def blocked_for(self, now: float) -> float:
        """Seconds the account must still wait after a rejection (0.0 when it need not)."""
        return 0.0 if self.blocked_until is None else max(0.0, self.blocked_until - now)

    def after_rejection(self, now: float, used: int, stated_limit: int | None) -> QuotaState:
        """The state after a rejection at ``now`` with ``used`` units spent in the minute."""
        seen = stated_limit if stated_limit is not None else used
        learnable = seen if seen >= MIN_LEARNABLE_LIMIT else None
        blocked = replace(self, blocked_until=now + WINDOW_SECONDS, last_rejected_at=now)
        known = self.known_limit(now)
        if known is None:  # the first rejection: learn, no slow-down yet
            if learnable is None:
                return replace(blocked, slowdowns=0)
            return replace(blocked, learned_limit=learnable, learned_at=now, slowdowns=0)
        lowered = known if learnable is None else min(known, learnable)
        return replace(blocked, learned_limit=lowered, slowdowns=self.active_slowdowns(now) + 1)


def window_usage(usage: Mapping[int, int], now: float) -> int:
    """The units spent in the sliding minute before ``now`` (usage per epoch second)."""
    return sum(units for second, units in usage.items() if second + WINDOW_SECONDS > now)


def wait_for_room(usage: Mapping[int, int], units: int, budget: int, now: float) -> float:
    """Seconds until ``units`` fit into ``budget`` in the sliding minute (0.0: now).

    A request larger than the whole budget waits for an empty minute and then
    goes alone, rather than never.
    """
    need = min(units, budget)
    live = sorted((s, u) for s, u in usage.items() if s + WINDOW_SECONDS > now)
    excess = sum(u for _, u in live) + need - budget
    if excess <= 0:
        return 0.0
    for second, spent in live:
        excess -= spent
        if excess <= 0:
            return float(second + WINDOW_SECONDS - now)
    return float(WINDOW_SECONDS)  # unreachable: the live seconds hold more than the excess


def reservation_wait(state: QuotaState, usage: Mapping[int, int], units: int, now: float) -> float:
    """Seconds a reservation of ``units`` must wait: a rejection's block, else the room."""
    blocked = state.blocked_for(now)
    if blocked > 0:
        return blocked
    return wait_for_room(usage, units, state.budget(now), now)


def rejection_usage(usage: Mapping[int, int], units: int, now: float) -> int:
    """The units that were spent in the minute when a request of ``units`` was refused.

    The refused request's own units were reserved before it was sent; they are
    not part of what Google had allowed. They stay reserved all the same: a
    refused request may well have been counted.
    """
    return max(0, window_usage(usage, now) - units)


class QuotaPacer(Protocol):
    """One Gmail account's share of its per-user quota, the same for every worker."""

    def reserve(self, units: int) -> float:
        """Spend ``units`` now and return 0.0, or spend nothing and return the seconds to wait."""
        ...

    def take(self, units: int) -> None:
        """Spend ``units``, waiting (on the injected sleep) until they fit."""
        ...

    def rejected(self, units: int, stated_limit: int | None = None) -> float:
        """Record that Google refused a request of ``units``; the seconds to defer. Never raises."""
        ...

    def learned_limit(self) -> int | None:
        """The limit learned from Google and not yet forgotten, or None."""
        ...

    def close(self) -> None:
        """Release connections; safe to call twice."""
        ...


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class TimeSource:
    """A clock and the sleep that waits on it (the pacer's and the backfill's time)."""

    clock: Clock
    sleep: Sleep


SYSTEM_TIME = TimeSource(_utcnow, time.sleep)


def scaled_time(factor: float, start: datetime | None = None) -> TimeSource:
    """A clock running ``factor`` times faster than real time, from ``start`` (now).

    Its sleep waits ``seconds / factor`` real seconds, so whatever waits on
    this clock waits the same clock-seconds as on the real one.
    """
    if factor <= 0:
        raise ValueError("a time scale must be positive")
    origin = (start or _utcnow()).timestamp()
    real_origin = time.monotonic()

    def clock() -> datetime:
        return datetime.fromtimestamp(origin + (time.monotonic() - real_origin) * factor, UTC)

    def sleep(seconds: float) -> None:
        time.sleep(max(0.0, seconds) / factor)

    return TimeSource(clock, sleep)


class PacerBase:
    """Waiting and the clock, on top of the storage's three atomic operations."""

    # What the storage raises when it cannot be reached (each implementation names its own).
    _storage_errors: tuple[type[Exception], ...] = ()

    def __init__(self, account_id: int, clock: Clock | None = None, sleep: Sleep | None = None):
        self.account_id = account_id
        self.clock = clock or _utcnow
        self.sleep = sleep or time.sleep

    def _now(self) -> float:
        return self.clock().timestamp()

    def _reserve_at(self, now: float, units: int) -> float:
        """Atomically: spend ``units`` at ``now`` when they fit, else the wait."""
        raise NotImplementedError

    def _reject_at(self, now: float, units: int, stated_limit: int | None) -> QuotaState:
        """Atomically: store and return the state after a rejection of ``units`` at ``now``."""
        raise NotImplementedError

    def _state(self) -> QuotaState:
        """The stored state of the account (a fresh one when nothing is stored)."""
        raise NotImplementedError

    def close(self) -> None:
        """Release connections; safe to call twice."""

    def reserve(self, units: int) -> float:
        """Spend ``units`` now and return 0.0, or spend nothing and return the seconds to wait.

        A TransientError in one sentence when the shared usage cannot be reached.
        """
        try:
            wait = self._reserve_at(self._now(), max(0, units))
        except self._storage_errors as exc:
            raise self._unreachable(exc) from None
        if not wait:
            catalogue.gmail_units(max(0, units))
        return wait

    def take(self, units: int) -> None:
        """Spend ``units``, sleeping until they fit."""
        while (wait := self.reserve(units)) > 0:
            self.sleep(wait)

    def rejected(self, units: int, stated_limit: int | None = None) -> float:
        """Record a rejection of a request of ``units``; the seconds to defer the work.

        Never raises: when the shared state cannot be written, the rejection is
        logged and the work still waits the account's minute.
        """
        now = self._now()
        catalogue.gmail_rejection()
        try:
            return self._reject_at(now, max(0, units), stated_limit).blocked_for(now)
        except self._storage_errors as exc:
            log.warning(
                "Could not record a Gmail quota rejection of account %s (%s); waiting a minute.",
                self.account_id,
                type(exc).__name__,
            )
            return float(WINDOW_SECONDS)

    def learned_limit(self) -> int | None:
        """The limit learned from Google and not yet forgotten, or None."""
        try:
            return self._state().known_limit(self._now())
        except self._storage_errors as exc:
            raise self._unreachable(exc) from None

    def _unreachable(self, exc: Exception) -> TransientError:
        log.warning("The shared Gmail quota of account %s: %s", self.account_id, exc)
        return TransientError("The shared Gmail quota could not be reached; the work waits.")


def pacer_for(
    store: Store,
    settings: Settings,
    account_id: int,
    clock: Clock | None = None,
    sleep: Sleep | None = None,
) -> QuotaPacer:
    """The account's pacer in Redis when ``MAILROOM_REDIS_URL`` is set, else in the store."""
    if settings.redis_url:
        import redis

        from mailroom.providers.gmail.quota_redis import RedisQuotaPacer

        client = redis.Redis.from_url(settings.redis_url)
        prefix = f"{settings.namespace}:gmail-quota:"
        return RedisQuotaPacer(client, account_id, prefix=prefix, clock=clock, sleep=sleep)
    from mailroom.providers.gmail.quota_store import StoreQuotaPacer

    return StoreQuotaPacer(store, account_id, clock=clock, sleep=sleep)
