"""The lane buckets: a burst, then the configured rate, shared by every worker (store or Redis)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import redis

from mailroom.config import LaneRate, Settings
from mailroom.outbound.pace import Pace, RedisPace, StorePace, pace_for, refill, throttled
from mailroom.store.engine import Store
from tests.conftest import service_missing
from tests.factories import BASE_TIME

RATES = {"urgent": LaneRate(120.0, 3), "calm": LaneRate(30.0, 5)}
REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture(params=["store", "redis"])
def pace(request: pytest.FixtureRequest, store: Store) -> Iterator[Pace]:
    """Buckets in the store (SQLite and PostgreSQL) or in Redis (once per store, harmless)."""
    if request.param == "store":
        yield StorePace(store, RATES)
        return
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.RedisError as exc:
        client.close()
        service_missing("Redis", str(exc))
    prefix = f"test-{uuid.uuid4().hex[:8]}:pace:"
    buckets = RedisPace(client, RATES, prefix=prefix)
    yield buckets
    client.delete(*[prefix + lane for lane in RATES])
    buckets.close()


def test_refill_arithmetic() -> None:
    """A full bucket gives burst tokens, then one per 60/rate seconds; giving back caps at burst."""
    rate = LaneRate(30.0, 2)
    tokens, at, wait = refill(2.0, 0.0, 0.0, rate, 1.0)
    assert (tokens, wait) == (1.0, 0.0)
    tokens, at, wait = refill(0.5, 0.0, 0.0, rate, 1.0)
    assert (tokens, wait) == (0.5, 1.0)  # half a token is missing: 1 s at 0.5 tokens/s
    tokens, at, wait = refill(0.0, 0.0, 10.0, rate, 1.0)
    assert (tokens, at, wait) == (1.0, 10.0, 0.0)  # refilled to the burst of 2, one taken
    assert refill(2.0, 5.0, 4.0, rate, -1.0)[:2] == (2.0, 5.0)  # no refill backwards, capped


def test_burst_then_the_rate(pace: Pace) -> None:
    """A lane gives its burst at once, then waits the rate's interval for each further token."""
    takes = [pace.take("calm", BASE_TIME) for _ in range(6)]
    assert takes[:5] == [0.0] * 5
    assert takes[5] == pytest.approx(2.0)  # 30 a minute
    assert pace.take("calm", BASE_TIME + timedelta(seconds=1)) == pytest.approx(1.0)
    assert pace.take("calm", BASE_TIME + timedelta(seconds=2)) == 0.0
    assert pace.take("urgent", BASE_TIME) == 0.0  # each lane has its own bucket


def test_given_back_token_is_taken_again(pace: Pace) -> None:
    """A token given back (the message was not handed over) can be taken at once."""
    for _ in range(3):
        assert pace.take("urgent", BASE_TIME) == 0.0
    assert pace.take("urgent", BASE_TIME) > 0
    pace.give_back("urgent", BASE_TIME)
    assert pace.take("urgent", BASE_TIME) == 0.0


def test_concurrent_workers_never_share_a_token(pace: Pace) -> None:
    """Eight workers taking at the same moment get exactly the burst between them."""
    taken: list[float] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(4):
            wait = pace.take("calm", BASE_TIME)
            with lock:
                taken.append(wait)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert taken.count(0.0) == 5
    assert len(taken) == 32


def test_throttled_lanes(tmp_path: Path) -> None:
    """urgent and calm are paced, direct never; pacing off paces no lane."""
    on = Settings(data_dir=tmp_path)
    off = Settings(data_dir=tmp_path, pacing="off")
    assert [throttled(lane, on) for lane in ("urgent", "calm", "direct")] == [True, True, False]
    assert [throttled(lane, off) for lane in ("urgent", "calm", "direct")] == [False] * 3


def test_pace_for_follows_the_redis_setting(store: Store, tmp_path: Path) -> None:
    """Without MAILROOM_REDIS_URL the buckets are in the store, with it in Redis."""
    embedded = pace_for(store, Settings(data_dir=tmp_path, lane_rates="calm=6/1"))
    assert isinstance(embedded, StorePace)
    assert embedded.rates["calm"] == LaneRate(6.0, 1)
    scaled = pace_for(store, Settings(data_dir=tmp_path, redis_url=REDIS_URL))
    assert isinstance(scaled, RedisPace)
    scaled.close()
