"""Both quota pacers (the store's on SQLite and PostgreSQL, and Redis's) against one contract.

A small stand-in for Google's per-user minute (``GoogleMinute``, fixed clock
minutes with a hidden limit) refuses requests the way the quota does; the
pacer never sees the limit, only the refusals, exactly as against Gmail.
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from mailroom.config import Settings
from mailroom.providers.base import TransientError
from mailroom.providers.gmail.quota import (
    LEARNED_LIMIT_LIFETIME,
    QuotaPacer,
    pacer_for,
    units_for_messages,
)
from mailroom.providers.gmail.quota_redis import RedisQuotaPacer
from mailroom.providers.gmail.quota_store import StoreQuotaPacer
from mailroom.store.engine import Store
from tests.conftest import service_missing
from tests.helpers import make_account
from tests.outbound.core_support import Clock

REDIS_URL = "redis://127.0.0.1:6379/0"
REQUEST = units_for_messages(5)  # 300 units: one request of five full messages

MakePacer = Callable[[int, Clock], QuotaPacer]


class GoogleMinute:
    """Google's side: units per user per clock minute, refused above a limit it does not tell."""

    def __init__(self, clock: Clock, limit: int) -> None:
        self.clock = clock
        self.limit = limit
        self.spent: Counter[int] = Counter()
        self.rejections = 0

    def call(self, units: int) -> bool:
        """Whether a request of ``units`` is allowed now (a refused one costs nothing)."""
        minute = int(self.clock().timestamp() // 60)
        if self.spent[minute] + units > self.limit:
            self.rejections += 1
            return False
        self.spent[minute] += units
        return True


class SleepingClock(Clock):
    """A clock whose sleep moves it on and remembers each wait."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeps: list[float] = []

    def sleep(self, seconds: float) -> None:
        """Sleep without sleeping: the clock moves on by ``seconds``."""
        self.sleeps.append(seconds)
        self.advance(seconds)


@pytest.fixture(params=["store", "redis"])
def make_pacer(request: pytest.FixtureRequest, store: Store) -> Iterator[MakePacer]:
    """A factory of pacers for an account: on the store (both stores) or on Redis."""
    made: list[QuotaPacer] = []
    prefix = f"test-{uuid.uuid4().hex[:8]}:gmail-quota:"
    if request.param == "redis":
        probe = redis.Redis.from_url(REDIS_URL)
        try:
            probe.ping()
        except redis.RedisError as exc:
            probe.close()
            service_missing("Redis", str(exc))
        probe.close()

    def make(account_id: int, clock: Clock) -> QuotaPacer:
        sleep = clock.sleep if isinstance(clock, SleepingClock) else None
        pacer: QuotaPacer
        if request.param == "store":
            pacer = StoreQuotaPacer(store, account_id, clock=clock, sleep=sleep)
        else:
            client = redis.Redis.from_url(REDIS_URL)
            pacer = RedisQuotaPacer(client, account_id, prefix=prefix, clock=clock, sleep=sleep)
        made.append(pacer)
        return pacer

    yield make
    cleanup = redis.Redis.from_url(REDIS_URL) if request.param == "redis" else None
    if cleanup is not None:
        keys = list(cleanup.scan_iter(match=prefix + "*"))
        if keys:
            cleanup.delete(*keys)
        cleanup.close()
    for pacer in made:
        pacer.close()


def _account(store: Store, name: str = "gmail") -> int:
    return make_account(store, name=name)[1]


def _fit_now(pacer: QuotaPacer, units: int = REQUEST) -> int:
    """How many requests of ``units`` the pacer grants before it asks to wait."""
    granted = 0
    while pacer.reserve(units) == 0.0:
        granted += 1
    return granted


def test_a_fresh_account_gets_85_percent_of_15000_a_minute(
    make_pacer: MakePacer, store: Store
) -> None:
    """42 requests of 300 units fit into 12,750; the 43rd waits the minute out, then fits."""
    clock = Clock()
    pacer = make_pacer(_account(store), clock)
    assert _fit_now(pacer) == 42
    assert pacer.reserve(REQUEST) == pytest.approx(60.0)
    clock.advance(59)
    assert pacer.reserve(REQUEST) == pytest.approx(1.0)
    clock.advance(1)
    assert pacer.reserve(REQUEST) == 0.0
    assert pacer.learned_limit() is None


def test_the_minute_slides(make_pacer: MakePacer, store: Store) -> None:
    """Units spent 30 s apart free up 30 s apart: the window is the last 60 seconds."""
    clock = Clock()
    pacer = make_pacer(_account(store), clock)
    assert pacer.reserve(6_000) == 0.0
    clock.advance(30)
    assert pacer.reserve(6_000) == 0.0
    assert pacer.reserve(6_000) == pytest.approx(30.0)  # the first 6,000 leave at 60 s
    clock.advance(30)
    assert pacer.reserve(6_000) == 0.0
    assert pacer.reserve(6_000) == pytest.approx(30.0)


def test_the_limit_is_learned_from_the_first_rejection(make_pacer: MakePacer, store: Store) -> None:
    """Against a hidden 6,000 limit: one rejection, 6,000 learned, then none for ten minutes."""
    clock = SleepingClock()
    pacer = make_pacer(_account(store), clock)
    google = GoogleMinute(clock, limit=6_000)
    start = clock.now
    while (clock.now - start).total_seconds() < 600:
        pacer.take(REQUEST)
        if not google.call(REQUEST):
            wait = pacer.rejected(REQUEST)
            assert wait == pytest.approx(60.0)
            clock.sleep(wait)
    assert google.rejections == 1
    assert pacer.learned_limit() == 6_000
    full_minutes = sorted(google.spent)[2:-1]  # after the learning, whole minutes only
    assert full_minutes
    assert all(google.spent[m] <= 5_100 for m in full_minutes)  # 85 % of what was learned
    assert all(google.spent[m] >= 4_800 for m in full_minutes)  # and not much less
    assert clock.sleeps  # it waited on the injected sleep, never on the real one


def test_a_stated_limit_is_learned_as_stated(make_pacer: MakePacer, store: Store) -> None:
    """A rejection that names the limit teaches that number, whatever was spent."""
    clock = Clock()
    pacer = make_pacer(_account(store), clock)
    pacer.reserve(600)
    assert pacer.rejected(300, stated_limit=6_000) == pytest.approx(60.0)
    assert pacer.learned_limit() == 6_000


def test_a_rejection_defers_every_worker_of_the_account(
    make_pacer: MakePacer, store: Store
) -> None:
    """After one worker's rejection another worker's reservation waits the same minute."""
    clock = Clock()
    account = _account(store)
    first, second = make_pacer(account, clock), make_pacer(account, clock)
    assert first.reserve(REQUEST) == 0.0
    first.rejected(REQUEST)
    clock.advance(20)
    assert second.reserve(REQUEST) == pytest.approx(40.0)
    assert second.learned_limit() is None  # 300 units spent teach nothing
    clock.advance(40)
    assert second.reserve(REQUEST) == 0.0


def test_workers_share_one_minute(make_pacer: MakePacer, store: Store) -> None:
    """Two pacers of one account (two workers) draw from one budget; other accounts do not."""
    clock = Clock()
    account = _account(store)
    first, second = make_pacer(account, clock), make_pacer(account, clock)
    assert _fit_now(first) == 42
    assert second.reserve(REQUEST) > 0
    other = make_pacer(_account(store, "other"), clock)
    assert _fit_now(other) == 42


def test_concurrent_workers_never_overspend(make_pacer: MakePacer, store: Store) -> None:
    """Six threads racing for one account's minute are granted exactly the budget's worth."""
    clock = Clock()
    account = _account(store)
    pacers = [make_pacer(account, clock) for _ in range(6)]
    granted: list[int] = []
    lock = threading.Lock()

    def work(pacer: QuotaPacer) -> None:
        count = _fit_now(pacer, 750)
        with lock:
            granted.append(count)

    threads = [threading.Thread(target=work, args=(pacer,)) for pacer in pacers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(granted) == 17  # 17 * 750 = 12,750


def test_a_rejection_at_the_known_limit_slows_down(make_pacer: MakePacer, store: Store) -> None:
    """A second rejection lowers the limit to what was spent and keeps 80 % for ten minutes."""
    clock = Clock()
    pacer = make_pacer(_account(store), clock)
    assert pacer.reserve(6_300) == 0.0
    pacer.rejected(300)  # learns 6,000: budget 5,100
    clock.advance(61)
    assert _fit_now(pacer) == 17  # 5,100
    pacer.rejected(300)  # refused after 4,800: limit 4,800, budget 4800 * 0.85 * 0.8 = 3,264
    clock.advance(61)
    assert _fit_now(pacer) == 10  # 3,000 of 3,264
    assert pacer.learned_limit() == 4_800
    clock.advance(600)
    assert _fit_now(pacer) == 13  # 3,900 of 4,080: the slow-down is over


def test_a_learned_limit_is_forgotten_after_a_day(make_pacer: MakePacer, store: Store) -> None:
    """A day after learning 6,000 the pacer is back at 15,000 and can learn a raised limit."""
    clock = Clock()
    pacer = make_pacer(_account(store), clock)
    pacer.reserve(6_300)
    pacer.rejected(300)
    assert pacer.learned_limit() == 6_000
    clock.advance(LEARNED_LIMIT_LIFETIME)
    assert pacer.learned_limit() is None
    assert _fit_now(pacer) == 42
    pacer.rejected(REQUEST)
    assert pacer.learned_limit() == 41 * REQUEST


def test_pacer_for_chooses_redis_when_configured(tmp_path: Path, store: Store) -> None:
    """With MAILROOM_REDIS_URL the pacer lives in Redis, without it in the store."""
    account = _account(store)
    embedded = pacer_for(store, Settings(data_dir=tmp_path), account)
    assert isinstance(embedded, StoreQuotaPacer)
    scaled = pacer_for(store, Settings(data_dir=tmp_path, redis_url=REDIS_URL), account)
    assert isinstance(scaled, RedisQuotaPacer)
    assert scaled.usage_key.startswith("mailroom:gmail-quota:")
    embedded.close()
    scaled.close()


def test_an_unreachable_redis_defers_and_says_so_in_one_sentence() -> None:
    """Without its Redis a rejection still defers a minute and a reservation is a TransientError."""
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=2)
    pacer = RedisQuotaPacer(client, 1, prefix="test-unreachable:", clock=Clock())
    assert pacer.rejected(REQUEST) == 60.0
    with pytest.raises(TransientError) as caught:
        pacer.reserve(REQUEST)
    assert str(caught.value) == "The shared Gmail quota could not be reached; the work waits."
    with pytest.raises(TransientError):
        pacer.learned_limit()
    pacer.close()
