"""The watch supervisor with an injected clock and fake watchers (no sleeps)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from sqlalchemy import select

from mailroom.jobs.leases import LocalLeases
from mailroom.jobs.supervisor import Supervisor, SupervisorConfig
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.providers.base import AuthError, RateLimitError, TransientError
from mailroom.store.engine import Store
from mailroom.store.models import Account


class FakeWatcher:
    """A watcher whose run() blocks until stopped or told to fail."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self.error: BaseException | None = None
        self.running = threading.Event()

    def run(self) -> None:
        self.running.set()
        self._done.wait()
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        self._done.set()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self._done.set()


class Clock:
    """A settable clock."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _accounts(store: Store, count: int) -> list[int]:
    with store.session() as session:
        user = get_or_create_user(session)
        return [get_or_create_account(session, user, f"a{i}", "imap").id for i in range(count)]


def _state(store: Store, account_id: int) -> tuple[str, str]:
    with store.session() as session:
        account = session.get(Account, account_id)
        assert account is not None
        return account.status, account.watch_state


def _wait(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


class Harness:
    """A supervisor whose watchers are fakes we can fail."""

    def __init__(
        self,
        store: Store,
        leases: LocalLeases | None = None,
        poll: Callable[[int], None] | None = None,
    ) -> None:
        self.watchers: dict[int, list[FakeWatcher]] = {}
        self.polls: list[int] = []
        self.supervisor = Supervisor(
            store,
            watcher_for=self._make,
            poll=poll or self.polls.append,
            leases=leases,
            config=SupervisorConfig(poll_interval=300, lease_ttl=90),
        )

    def _make(self, account_id: int) -> FakeWatcher:
        watcher = FakeWatcher()
        self.watchers.setdefault(account_id, []).append(watcher)
        return watcher

    def current(self, account_id: int) -> FakeWatcher:
        return self.watchers[account_id][-1]

    def fail(self, account_id: int, error: BaseException) -> None:
        watcher = self.current(account_id)
        watcher.fail(error)
        _wait(lambda: account_id not in self.supervisor.watching())


def test_one_watcher_per_active_account_and_a_poll(store: Store) -> None:
    """Each active account gets a watcher and is polled on the first tick."""
    accounts = _accounts(store, 2)
    clock = Clock()
    harness = Harness(store)
    harness.supervisor.tick(clock.now)
    assert harness.supervisor.watching() == accounts
    assert harness.polls == accounts
    assert _state(store, accounts[0]) == ("active", "watching")
    harness.supervisor.tick(clock.now + 10)
    assert len(harness.watchers[accounts[0]]) == 1 and harness.polls == accounts
    harness.supervisor.stop()
    assert _state(store, accounts[0]) == ("active", "idle")


def test_an_account_added_or_reactivated_meanwhile_is_polled_at_once(store: Store) -> None:
    """The poll round is minutes away; a new account's first sync (and import) is not."""
    first = _accounts(store, 1)
    clock = Clock()
    harness = Harness(store)
    harness.supervisor.tick(clock.now)
    with store.session() as session:
        added = get_or_create_account(session, get_or_create_user(session), "new", "imap").id
    harness.supervisor.tick(clock.now + 10)
    assert harness.polls == [*first, added]
    assert harness.supervisor.watching() == [*first, added]
    harness.supervisor.tick(clock.now + 20)
    assert harness.polls == [*first, added]  # once, not every tick
    _set_status(store, added, "auth_error")
    harness.supervisor.tick(clock.now + 30)
    _set_status(store, added, "active")  # the owner gave the right password
    harness.supervisor.tick(clock.now + 40)
    assert harness.polls == [*first, added, added]
    harness.supervisor.tick(clock.now + 300)  # the round polls everyone, once
    assert harness.polls == [*first, added, added, *first, added]
    harness.supervisor.stop()


def _set_status(store: Store, account_id: int, status: str) -> None:
    with store.session() as session:
        account = session.get(Account, account_id)
        assert account is not None
        account.status = status


def test_backoff_doubles_to_the_cap_and_resets_after_health(store: Store) -> None:
    """Failures back off 5 s, 10 s, 20 s ... capped at 5 min; a long run resets to 5 s."""
    (account,) = _accounts(store, 1)
    clock = Clock()
    harness = Harness(store)
    harness.supervisor.tick(clock.now)
    delays = []
    for _ in range(8):
        harness.fail(account, TransientError("connection reset"))
        harness.supervisor.tick(clock.now)
        state = _state(store, account)[1]
        delay = int(state.split(":")[1]) / 1000
        delays.append(delay)
        clock.now += delay - 0.5
        harness.supervisor.tick(clock.now)
        assert account not in harness.supervisor.watching()  # not before the delay is over
        clock.now += 0.5
        harness.supervisor.tick(clock.now)
        assert account in harness.supervisor.watching()
    assert delays == [5, 10, 20, 40, 80, 160, 300, 300]
    clock.now += 120  # a healthy run
    harness.fail(account, TransientError("bye"))
    harness.supervisor.tick(clock.now)
    assert _state(store, account)[1] == "backoff:5000"
    harness.supervisor.stop()


def test_auth_error_stops_watching_and_marks_the_account(store: Store) -> None:
    """A watcher failing with AuthError puts the account in auth_error and is not restarted."""
    (account,) = _accounts(store, 1)
    clock = Clock()
    harness = Harness(store)
    harness.supervisor.tick(clock.now)
    harness.fail(account, AuthError("The server refused the password."))
    harness.supervisor.tick(clock.now)
    clock.now += 1000
    harness.supervisor.tick(clock.now)
    assert _state(store, account) == ("auth_error", "idle")
    assert len(harness.watchers[account]) == 1


def test_poll_errors_follow_the_semantics(store: Store) -> None:
    """Poll: AuthError marks the account, a rate limit retries next tick, others are logged."""
    a, b, c = _accounts(store, 3)
    calls: list[int] = []

    def poll(account_id: int) -> None:
        calls.append(account_id)
        if account_id == a:
            raise AuthError("refused")
        if account_id == b and calls.count(b) == 1:
            raise RateLimitError("slow down")
        if account_id == c:
            raise RuntimeError("boom")

    clock = Clock()
    harness = Harness(store, poll=poll)
    harness.supervisor.tick(clock.now)
    assert _state(store, a)[0] == "auth_error"
    harness.supervisor.tick(clock.now + 1)  # rate limit: retried on the next tick
    assert calls.count(b) == 2 and calls.count(a) == 1
    assert _state(store, c)[0] == "active"
    harness.supervisor.stop()


def test_two_supervisors_share_accounts_through_leases(store: Store) -> None:
    """With leases, exactly one supervisor watches each account; a dead one is replaced."""
    accounts = _accounts(store, 3)
    clock = Clock()
    leases = LocalLeases(clock)
    first, second = Harness(store, leases), Harness(store, leases)
    first.supervisor.tick(clock.now)
    second.supervisor.tick(clock.now)
    assert first.supervisor.watching() == accounts and second.supervisor.watching() == []
    for step in range(1, 4):  # renewals keep the leases while the first lives
        clock.now += 30
        first.supervisor.tick(clock.now)
        second.supervisor.tick(clock.now)
        assert second.supervisor.watching() == [], step
    # the first supervisor dies without releasing: the TTL runs out
    clock.now += 91
    second.supervisor.tick(clock.now)
    assert second.supervisor.watching() == accounts
    for watcher_list in first.watchers.values():
        watcher_list[-1].stop()
    second.supervisor.stop()


def test_lost_lease_tears_the_watcher_down(store: Store) -> None:
    """When renewal fails (the lease was taken), the local watcher stops."""
    (account,) = _accounts(store, 1)
    clock = Clock()
    leases = LocalLeases(clock)
    harness = Harness(store, leases)
    harness.supervisor.tick(clock.now)
    assert harness.supervisor.watching() == [account]
    clock.now += 100  # missed renewals: expired
    thief = leases.acquire(f"watch:{account}", 90)
    assert thief is not None
    harness.supervisor.tick(clock.now)
    assert harness.supervisor.watching() == []
    assert not harness.current(account).running.is_set() or harness.current(account)._done.is_set()
    harness.supervisor.stop()


def test_lease_is_renewed_during_backoff(store: Store) -> None:
    """A watcher backing off keeps (renews) its lease so no one else grabs the account."""
    (account,) = _accounts(store, 1)
    clock = Clock()
    leases = LocalLeases(clock)
    harness, other = Harness(store, leases), Harness(store, leases)
    harness.supervisor.tick(clock.now)
    for _ in range(6):
        harness.fail(account, TransientError("down"))
        harness.supervisor.tick(clock.now)
        clock.now += 31
        harness.supervisor.tick(clock.now)
        other.supervisor.tick(clock.now)
        assert other.supervisor.watching() == []
    harness.supervisor.stop()
    clock.now += 30  # released on clean stop: taken on the other's next attempt, not after TTL
    other.supervisor.tick(clock.now)
    assert other.supervisor.watching() == [account]
    other.supervisor.stop()


@pytest.mark.parametrize("status", ["disconnected", "auth_error"])
def test_inactive_accounts_are_not_watched(store: Store, status: str) -> None:
    """An account that leaves the active state loses its watcher and lease."""
    (account,) = _accounts(store, 1)
    clock = Clock()
    leases = LocalLeases(clock)
    harness = Harness(store, leases)
    harness.supervisor.tick(clock.now)
    with store.session() as session:
        row = session.scalars(select(Account).where(Account.id == account)).one()
        row.status = status
    harness.supervisor.tick(clock.now + 1)
    assert harness.supervisor.watching() == []
    assert leases.acquire(f"watch:{account}", 90) is not None


def test_polls_are_spread_over_the_interval_never_all_at_once(store: Store) -> None:
    """A round polls 20 at once and the rest evenly over 80 % of it; each keeps its phase."""
    accounts = _accounts(store, 120)
    clock = Clock()
    times: dict[int, list[float]] = {}

    def poll(account_id: int) -> None:
        times.setdefault(account_id, []).append(clock.now)

    supervisor = Supervisor(
        store, watcher_for=lambda _a: None, poll=poll, config=SupervisorConfig(poll_interval=300)
    )
    per_tick = []
    start = clock.now
    for _ in range(600):  # two rounds, a tick a second
        before = sum(len(t) for t in times.values())
        supervisor.tick(clock.now)
        per_tick.append(sum(len(t) for t in times.values()) - before)
        clock.now += 1
    assert per_tick[0] == per_tick[300] == 20  # a round's burst
    assert max(per_tick[1:300] + per_tick[301:]) <= 2
    first = sorted(t[0] - start for t in times.values())
    assert first[-1] <= 0.8 * 300  # the round is done before the next begins
    assert sorted(times) == accounts and all(len(t) == 2 for t in times.values())
    assert {round(t[1] - t[0]) for t in times.values()} == {300}  # an interval apart
    order = sorted(accounts, key=lambda a: times[a][0])
    assert order != accounts  # a random order, not the accounts' ids


def test_a_dead_holders_accounts_move_right_after_its_lease_expires(store: Store) -> None:
    """The survivor retries held leases every 3 s: it takes over within TTL + 3 s of the death."""
    accounts = _accounts(store, 2)
    clock = Clock()
    leases = LocalLeases(clock)
    first, second = Harness(store, leases), Harness(store, leases)
    start = clock.now
    first.supervisor.tick(start)
    died = start + 29  # just before its first renewal: its leases run out at start + 90
    while second.supervisor.watching() != accounts:
        clock.now += 1
        if clock.now <= died:
            first.supervisor.tick(clock.now)
        if clock.now >= start + 5:  # the second starts a little later (ttl/3 would miss)
            second.supervisor.tick(clock.now)
        assert clock.now <= start + 90 + 3
    assert clock.now >= start + 90  # not before the leases expired
    for watcher_list in first.watchers.values():
        watcher_list[-1].stop()
    second.supervisor.stop()


class QuietWatcher:
    """A background watcher (no thread): ends when stopped."""

    def __init__(self) -> None:
        self._done: Callable[[BaseException | None], None] | None = None

    def start(self, done: Callable[[BaseException | None], None]) -> None:
        self._done = done

    def stop(self) -> None:
        if self._done is not None:
            self._done(None)


def test_supervisors_started_together_share_the_accounts(store: Store) -> None:
    """At most 100 starts a tick, in each one's random order: two together split 300 accounts."""
    accounts = _accounts(store, 300)
    clock = Clock()
    leases = LocalLeases(clock)
    pair = [
        Supervisor(
            store, watcher_for=lambda _a: QuietWatcher(), poll=lambda _a: None, leases=leases
        )
        for _ in range(2)
    ]
    pair[0].tick(clock.now)
    assert len(pair[0].watching()) == 100  # one tick's batch, not all 300
    for _ in range(3):
        clock.now += 1
        for supervisor in pair:
            supervisor.tick(clock.now)
    held = [set(s.watching()) for s in pair]
    assert held[0] | held[1] == set(accounts) and not held[0] & held[1]
    assert min(len(h) for h in held) >= 75
    for supervisor in pair:
        supervisor.stop()


def test_two_supervisors_poll_each_account_once_a_round_between_them(store: Store) -> None:
    """Sharing leases, two supervisors' rounds ask one poll per account and interval (not
    two); when one dies, the other polls every account, the first time at most the claim
    (90 % of the interval) late, then every interval."""
    accounts = _accounts(store, 60)
    clock = Clock()
    leases = LocalLeases(clock)
    times: dict[int, list[float]] = {}

    def poll(account_id: int) -> None:
        times.setdefault(account_id, []).append(clock.now)

    pair = [
        Supervisor(
            store,
            watcher_for=lambda _a: None,
            poll=poll,
            leases=leases,
            config=SupervisorConfig(poll_interval=300),
        )
        for _ in range(2)
    ]
    for _ in range(900):  # three rounds, both supervisors ticking every second
        for supervisor in pair:
            supervisor.tick(clock.now)
        clock.now += 1
    assert sorted(times) == accounts
    assert all(len(t) == 3 for t in times.values()), times
    died_at = clock.now
    for _ in range(900):  # the second one alone
        pair[1].tick(clock.now)
        clock.now += 1
    for account, polled in times.items():
        after = [t for t in polled if t >= died_at]
        assert len(after) >= 2, (account, polled)
        gaps = [b - a for a, b in zip(polled, polled[1:], strict=False)]
        assert max(gaps) <= 300 * 1.9, (account, polled)
        assert gaps[-1] == 300, (account, polled)
