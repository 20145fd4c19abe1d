"""Watch leases in real Redis: only the owner renews or releases, TTL expiry frees."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

import pytest
import redis

from mailroom.jobs.leases import RedisLeases
from tests.conftest import service_missing


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    """A Redis client on the test server (MAILROOM_TEST_REDIS_URL)."""
    url = os.environ.get("MAILROOM_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
    connection = redis.Redis.from_url(url)
    try:
        connection.ping()
    except redis.RedisError as exc:
        connection.close()
        service_missing("Redis", str(exc))
    yield connection
    connection.close()


def test_only_one_holder_and_only_the_owner_renews(client: redis.Redis) -> None:
    """acquire is exclusive; renew/release with a foreign token do nothing."""
    leases = RedisLeases(client, prefix=f"test:{uuid.uuid4().hex}:")
    token = leases.acquire("watch:1", 5)
    assert token is not None
    assert leases.acquire("watch:1", 5) is None
    assert not leases.renew("watch:1", "not-mine", 5)
    leases.release("watch:1", "not-mine")
    assert leases.acquire("watch:1", 5) is None
    assert leases.renew("watch:1", token, 5)
    leases.release("watch:1", token)
    assert leases.acquire("watch:1", 5) is not None


def test_expired_lease_is_free_and_cannot_be_renewed(client: redis.Redis) -> None:
    """After the TTL the key is free; the old owner's renewal fails."""
    leases = RedisLeases(client, prefix=f"test:{uuid.uuid4().hex}:")
    token = leases.acquire("watch:2", 0.05)
    assert token is not None
    time.sleep(0.1)
    newcomer = leases.acquire("watch:2", 5)
    assert newcomer is not None
    assert not leases.renew("watch:2", token, 5)
    leases.release("watch:2", token)
    assert not leases.renew("watch:2", "x", 5) and leases.renew("watch:2", newcomer, 5)
