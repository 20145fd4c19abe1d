"""The watch supervisor: live push per account, with the poll as correctness anchor.

Per active account the supervisor keeps one watcher (IMAP IDLE) running and
runs a reconciliation poll every ``poll_interval`` seconds. The poll is what
makes mailroom correct; the watcher only lowers latency, and exactly-once
ingest makes their overlap harmless.

State machine of one account's watcher (``Account.watch_state``)::

    idle ──lease won──▶ watching ──watch ended with an error──▶ backoff:<ms>
      ▲                   │  ▲                                      │
      │                   │  └────────── backoff elapsed ───────────┘
      └─ lease lost / account inactive / AuthError (status auth_error) ◀─┘

Backoff starts at 5 s and doubles to 5 min; a watcher that has run for a
while (it reported ``healthy``) resets it. Error semantics (watch and poll):
AuthError → account ``auth_error``, stop watching; ConfigError (no master key)
→ stop watching in this process, status unchanged; RateLimitError → retry on
the next tick; InvalidCursorError → the provider resets and resyncs the last
30 days on the next poll; anything else → log and retry — all as
:func:`mailroom.providers.errors.account_outcome` maps them. Every failure that
says why is recorded as the account's ``status_reason`` and logged once
(:mod:`mailroom.jobs.status`), never as a traceback per attempt.

Leases (when several supervisors run on several machines): a watcher starts
only after its process won the account's TTL lease (default 90 s), renewed
every ttl/3 for as long as the watcher lives — during backoff too. A failed
renewal tears the local watcher down; a lease won for a watcher that was
stopped meanwhile is released at once. A lease held by another process is tried
again every ``lease_retry`` seconds (3 s, at most ttl/3), so the accounts of a
process that died move within a few seconds of its leases' expiry — at most the
TTL plus that after its death. A tick starts at most ``start_batch`` (100)
watches, taking accounts in its own random order, so supervisors started
together share the accounts instead of the first taking them all (a running
set is not rebalanced: a supervisor started later gets what others drop).
Polls need no lease (idempotent); a round's polls claim their accounts (below).

New accounts: every tick reads the active accounts, so an account added while
the engine runs (web page, CLI, another machine) gets its watcher within a tick,
and its first poll at once — not at the next round, minutes away: the poll's
sync is what starts the history import. An account that comes back to
``active`` (its owner fixed the password) is polled at once the same way.

The poll round: every ``poll_interval`` (5 min) each active account is polled
once, but never all at once: up to ``poll_burst`` (20) at the round's start, the
rest at an even pace over ``poll_spread`` (80 %) of the interval, in an order
drawn at random per process and kept (so an account's polls stay an interval
apart, and two supervisors do not poll the same accounts in step). With leases
(several supervisors), a round's poll of an account first claims it for
``poll_claim`` (90 %) of the interval: a supervisor whose turn comes while
another's claim stands leaves that account out, so a round costs one sync job
per account however many supervisors run — not one per supervisor. Claims are
never released, only expire, so the first supervisor to try after expiry
polls: an account is polled once an interval while its pollers run, and when
the one that claimed it dies, the next poll comes at most ``poll_claim`` of an
interval late (its watch moves sooner, with the lease, and its takeover
syncs). The polls of new, reactivated and retried accounts claim nothing:
they are asked for a reason.

Watchers: one that offers ``start(done)`` (:class:`BackgroundWatcher`, such as
IMAP's multiplexed IDLE watcher) runs without a thread of
its own — a thousand IDLE connections share one selector thread and a few work
threads; one that only blocks in ``run()`` gets a thread, as before.

``tick(now)`` does all bookkeeping and is what tests drive with an injected
clock; ``run_forever`` calls it once a second in production.
"""

from __future__ import annotations

import logging
import math
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from sqlalchemy import select, update

from mailroom.jobs.leases import Leases
from mailroom.jobs.status import record_failure
from mailroom.metrics import catalogue
from mailroom.providers.base import Watcher
from mailroom.providers.errors import account_outcome
from mailroom.store.engine import Store
from mailroom.store.models import Account

log = logging.getLogger(__name__)

BACKOFF_INITIAL = 5.0
BACKOFF_MAX = 300.0
LEASE_TTL = 90.0
POLL_INTERVAL = 300.0
HEALTHY_AFTER = 60.0  # a watch that ran this long resets the backoff
POLL_BURST = 20  # polls a round may start at once; the rest follow at an even pace
POLL_SPREAD = 0.8  # a round's polls are spread over this share of the interval
POLL_CLAIM = 0.9  # a round's poll claims its account for this share of the interval
START_BATCH = 100  # watches started per tick at most
LEASE_RETRY = 3.0  # seconds between attempts at a lease another process holds
STOP_WAIT = 30.0  # longest wait for a stopped watch to let go of its connection


@runtime_checkable
class BackgroundWatcher(Protocol):
    """A watcher that runs without a thread of its own (IMAP IDLE on a multiplexer)."""

    def start(self, done: Callable[[BaseException | None], None]) -> None:
        """Begin watching; ``done`` is called once, with the failure or None, when it ends."""

    def stop(self) -> None:
        """Ask the watch to end (thread-safe, returns at once)."""


@dataclass
class _Watch:
    """One account's watcher as the supervisor sees it."""

    generation: int = 0
    watcher: Watcher | BackgroundWatcher | None = None
    live: bool = False  # started and not yet cleaned up
    thread: threading.Thread | None = None  # only for watchers that block in run()
    finished: threading.Event = field(default_factory=threading.Event)
    started_at: float = 0.0
    failure: BaseException | None = None
    ended: bool = False
    backoff: float = BACKOFF_INITIAL
    restart_at: float = 0.0
    lease_token: str | None = None
    renew_at: float = 0.0
    stopped: bool = False


@dataclass
class SupervisorConfig:
    """Timings of the supervisor (seconds)."""

    poll_interval: float = POLL_INTERVAL
    lease_ttl: float = LEASE_TTL
    lease_retry: float = LEASE_RETRY
    start_batch: int = START_BATCH
    backoff_initial: float = BACKOFF_INITIAL
    backoff_max: float = BACKOFF_MAX
    healthy_after: float = HEALTHY_AFTER
    poll_burst: int = POLL_BURST
    poll_spread: float = POLL_SPREAD
    poll_claim: float = POLL_CLAIM


@dataclass
class Supervisor:
    """Keeps watchers and polls going for every active account of a store."""

    store: Store
    watcher_for: Callable[[int], Watcher | BackgroundWatcher | None]
    poll: Callable[[int], None]
    leases: Leases | None = None
    config: SupervisorConfig = field(default_factory=SupervisorConfig)
    _watches: dict[int, _Watch] = field(default_factory=dict)
    _next_poll: float = 0.0
    _seen: set[int] | None = None  # active at the last tick (None before the first)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # The poll round: accounts still to poll, in this process's random order (each
    # account keeps its place, so it is polled every interval, at its own phase).
    _round: list[int] = field(default_factory=list)
    _round_start: float = 0.0
    _round_size: int = 0
    _phase: dict[int, float] = field(default_factory=dict)
    _retry: set[int] = field(default_factory=set)  # polls to try again on the next tick

    # -- accounts ------------------------------------------------------------

    def _active_accounts(self) -> list[int]:
        with self.store.session() as session:
            return list(
                session.scalars(
                    select(Account.id).where(Account.status == "active").order_by(Account.id)
                )
            )

    def _set(self, account_id: int, **values: object) -> None:
        with self.store.session() as session:
            session.execute(update(Account).where(Account.id == account_id).values(**values))

    # -- the tick ------------------------------------------------------------

    def tick(self, now: float) -> None:
        """One round of bookkeeping: leases, watcher restarts, failures, the poll."""
        with self._lock:
            active = set(self._active_accounts())
            for account_id in list(self._watches):
                if account_id not in active:
                    self._stop_watch(account_id, "idle")
            # In this process's random order, and a bounded number of starts per tick: two
            # supervisors starting together share the accounts, and a thousand logins are
            # not attempted in one second.
            started = 0
            for account_id in sorted(active, key=self._phase_of):
                started += self._tend(account_id, now, started < self.config.start_batch)
            # Added or reactivated since the last tick: polled at once (its sync starts
            # the import). At the first tick every account is in the round instead.
            due = active - self._seen if self._seen is not None else set()
            self._seen = active
            due |= self._claimed(self._round_due(active, now))
            due |= self._retry & active
            self._retry.clear()
            for account_id in sorted(due):
                self._poll(account_id)

    def _round_due(self, active: set[int], now: float) -> set[int]:
        """The accounts whose turn in the poll round has come (never all at once).

        Every ``poll_interval`` a round starts with every active account; up to
        ``poll_burst`` are polled at once, the others at an even pace over
        ``poll_spread`` of the interval, in a random order drawn per process (each
        account keeps its place, so its polls stay an interval apart).
        """
        if now >= self._next_poll:
            self._next_poll = now + self.config.poll_interval
            self._round = sorted(active, key=self._phase_of)
            self._round_start, self._round_size = now, len(active)
        spread = max(self.config.poll_interval * self.config.poll_spread, 1e-9)
        paced = math.ceil(self._round_size * (now - self._round_start) / spread)
        allowed = min(self._round_size, self.config.poll_burst + paced)
        done = self._round_size - len(self._round)  # polled so far this round
        take = max(0, allowed - done)
        batch, self._round = self._round[:take], self._round[take:]
        return set(batch) & active

    def _claimed(self, accounts: set[int]) -> set[int]:
        """Those of a round's ``accounts`` no other supervisor polled within this interval."""
        if self.leases is None:
            return accounts
        ttl = self.config.poll_interval * self.config.poll_claim
        return {a for a in accounts if self.leases.acquire(f"poll:{a}", ttl) is not None}

    def _phase_of(self, account_id: int) -> float:
        """The account's place in this process's random order (drawn once)."""
        phase = self._phase.get(account_id)
        if phase is None:
            phase = self._phase[account_id] = random.random()  # noqa: S311 - not secret
        return phase

    def _tend(self, account_id: int, now: float, may_start: bool = True) -> bool:
        """Renew, reap and (when ``may_start``) start; True when a watch was started."""
        watch = self._watches.setdefault(account_id, _Watch(restart_at=now))
        if watch.stopped:
            return False
        if watch.lease_token is not None and now >= watch.renew_at:
            assert self.leases is not None
            renewed = self.leases.renew(
                self._key(account_id), watch.lease_token, self.config.lease_ttl
            )
            catalogue.lease_renewed(renewed)
            if renewed:
                watch.renew_at = now + self.config.lease_ttl / 3
            else:
                log.warning("Lost the watch lease of account %s; stopping its watcher.", account_id)
                watch.lease_token = None
                self._end_watch(watch, account_id)
                self._set(account_id, watch_state="idle")
                watch.restart_at = now
        if watch.live and watch.ended:
            self._handle_end(account_id, watch, now)
        if may_start and not watch.live and not watch.stopped and now >= watch.restart_at:
            self._start(account_id, watch, now)
            return watch.live
        return False

    def _start(self, account_id: int, watch: _Watch, now: float) -> None:
        if watch.lease_token is None and self.leases is not None:
            generation = watch.generation
            token = self.leases.acquire(self._key(account_id), self.config.lease_ttl)
            if token is None:
                # Someone else holds it: try again soon, so that a dead holder's accounts
                # move right after its lease expires (within the TTL of its last renewal).
                watch.restart_at = now + min(self.config.lease_ttl / 3, self.config.lease_retry)
                return
            if watch.generation != generation or watch.stopped:
                self.leases.release(self._key(account_id), token)
                return
            watch.lease_token, watch.renew_at = token, now + self.config.lease_ttl / 3
        watcher = self.watcher_for(account_id)
        if watcher is None:
            watch.stopped = True  # the provider has no live push; the poll does it all
            self._release(account_id, watch)
            return
        watch.watcher, watch.failure, watch.ended, watch.started_at = watcher, None, False, now
        watch.live, watch.finished = True, threading.Event()
        if isinstance(watcher, BackgroundWatcher):
            watcher.start(self._ender(watch))
        else:  # a watcher that blocks in run(): a thread of its own
            watch.thread = threading.Thread(
                target=self._run,
                args=(watcher, self._ender(watch)),
                name=f"watch-{account_id}",
                daemon=True,
            )
            watch.thread.start()
        log.info("Watching account %s.", account_id)
        self._set(account_id, watch_state="watching")

    @staticmethod
    def _ender(watch: _Watch) -> Callable[[BaseException | None], None]:
        finished = watch.finished  # this start's, not a later restart's

        def done(failure: BaseException | None) -> None:
            if finished is watch.finished:
                watch.failure = failure
                watch.ended = True
            finished.set()

        return done

    @staticmethod
    def _run(watcher: Watcher, done: Callable[[BaseException | None], None]) -> None:
        try:
            watcher.run()
        except BaseException as exc:  # reported to the supervisor, never lost
            done(exc)
        else:
            done(None)

    def _handle_end(self, account_id: int, watch: _Watch, now: float) -> None:
        failure = watch.failure
        ran_for = now - watch.started_at
        self._end_watch(watch, account_id)
        if failure is not None:
            outcome = account_outcome(failure)
            if outcome.status is not None:  # auth_error: the owner must act
                record_failure(self.store, account_id, failure, watch_state="idle")
                self._stop_watch(account_id, "idle")
                return
            if not outcome.retry:
                # No master key (or the wrong one): every restart would fail the same way
                # until the operator fixes the setting and restarts; the poll still says so.
                record_failure(self.store, account_id, failure, watch_state="idle")
                watch.stopped = True
                self._release(account_id, watch)
                return
            if outcome.expected and outcome.recorded:
                record_failure(self.store, account_id, failure)
        if ran_for >= self.config.healthy_after:
            watch.backoff = self.config.backoff_initial
        delay = watch.backoff
        watch.backoff = min(watch.backoff * 2, self.config.backoff_max)
        watch.restart_at = now + delay
        catalogue.watch_reconnects()
        if failure is not None:
            log.info(
                "Watch of account %s ended (%s); retrying in %.0f s.", account_id, failure, delay
            )
        self._set(account_id, watch_state=f"backoff:{int(delay * 1000)}")

    def _poll(self, account_id: int) -> None:
        try:
            self.poll(account_id)
        except Exception as exc:
            outcome = account_outcome(exc)
            if not outcome.expected:
                log.exception("Poll of account %s failed; will retry.", account_id)
            elif outcome.status is not None:  # auth_error: stop watching until the owner acts
                record_failure(self.store, account_id, exc, watch_state="idle")
                self._stop_watch(account_id, "idle")
            elif outcome.recorded:
                record_failure(self.store, account_id, exc)
            else:  # the provider's own pace (rate limit) or a cursor reset: poll again soon
                log.info("Poll of account %s: %s; retrying next tick.", account_id, outcome.reason)
                self._retry.add(account_id)

    # -- stopping ------------------------------------------------------------

    def _end_watch(self, watch: _Watch, account_id: int) -> None:
        """Stop the watcher and wait until it let go of its connection."""
        if watch.watcher is not None:
            watch.watcher.stop()
        if watch.live:
            if not watch.finished.wait(STOP_WAIT):
                log.warning("The watch of account %s did not end in time.", account_id)
            if watch.thread is not None:
                watch.thread.join(timeout=1)
            log.info("Stopped watching account %s.", account_id)
        watch.watcher, watch.thread, watch.live, watch.ended = None, None, False, False
        watch.generation += 1

    def _release(self, account_id: int, watch: _Watch) -> None:
        if watch.lease_token is not None and self.leases is not None:
            self.leases.release(self._key(account_id), watch.lease_token)
        watch.lease_token = None

    def _stop_watch(self, account_id: int, state: str) -> None:
        watch = self._watches.pop(account_id, None)
        if watch is None:
            return
        watch.stopped = True
        self._end_watch(watch, account_id)
        self._release(account_id, watch)
        self._set(account_id, watch_state=state)

    def stop(self) -> None:
        """Stop every watcher and release every lease (clean shutdown)."""
        with self._lock:
            for watch in self._watches.values():  # all at once, then wait for each
                if watch.watcher is not None:
                    watch.watcher.stop()
            for account_id in list(self._watches):
                self._stop_watch(account_id, "idle")

    def watching(self) -> list[int]:
        """Accounts whose watcher runs in this process right now."""
        # A copy: the scrape thread asks while the tick thread adds and removes watches.
        watches = list(self._watches.items())
        return sorted(a for a, w in watches if w.live and not w.ended)

    @staticmethod
    def _key(account_id: int) -> str:
        return f"watch:{account_id}"

    def run_forever(
        self, stop: threading.Event, clock: Callable[[], float], interval: float = 1.0
    ) -> None:
        """Tick until ``stop`` is set, then shut down cleanly."""
        try:
            while not stop.is_set():
                try:
                    self.tick(clock())
                except Exception:
                    log.exception("Supervisor tick failed; continuing.")
                stop.wait(interval)
        finally:
            self.stop()
