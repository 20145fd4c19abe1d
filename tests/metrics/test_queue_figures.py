"""Queue depth and the oldest job's age, on both huey storages (SQLite file and Redis)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from huey import Huey

from mailroom.config import Settings
from mailroom.jobs.queues import make_queues
from mailroom.metrics.jobs import enqueued_at, queue_figures, uuid7
from tests.conftest import service_missing


def test_uuid7_carries_its_time_and_other_ids_carry_none() -> None:
    """A UUIDv7 gives back its millisecond; huey's UUIDv4 and free-form ids give None."""
    made = uuid7(1_700_000_000.1234)
    assert uuid.UUID(made).version == 7 and len(made) == 36
    assert enqueued_at(made) == pytest.approx(1_700_000_000.123, abs=0.001)
    assert enqueued_at(str(uuid.uuid4())) is None
    assert enqueued_at("a-job-id") is None
    assert uuid7() != uuid7()


@pytest.fixture(params=["sqlite", "redis"])
def queues(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Huey]]:
    """Two queues on a private SQLite file, or under a fresh namespace in the test Redis."""
    redis_url = None
    if request.param == "redis":
        redis_url = os.environ.get("MAILROOM_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
        try:
            redis.Redis.from_url(redis_url).ping()
        except redis.RedisError as exc:
            service_missing("Redis", str(exc))
    namespace = f"test-{uuid.uuid4().hex[:12]}"
    settings = Settings(data_dir=tmp_path, redis_url=redis_url, namespace=namespace)
    made = make_queues(settings, ("enrich", "release"))
    yield made
    for queue in made.values():
        queue.flush()


def test_depth_and_age_of_the_head_job(queues: dict[str, Huey]) -> None:
    """Jobs enqueued now: depth counts them, the head's age grows with the clock, empty is 0."""
    queue = queues["enrich"]
    task = queue.task(name="noop")(lambda: None)
    task()
    task()
    figures = queue_figures(queue)
    assert (figures.depth, figures.scheduled) == (2, 0)
    assert figures.oldest_age is not None and 0 <= figures.oldest_age < 120
    later = queue_figures(queue, now=time.time() + 300)
    assert later.oldest_age == pytest.approx(300, abs=120)
    assert queue_figures(queues["release"]).oldest_age == 0.0


def test_a_job_with_an_id_of_its_own_has_no_known_age(queues: dict[str, Huey]) -> None:
    """An immediate job enqueued with a caller's id is counted, its age left unknown."""
    queue = queues["enrich"]
    task = queue.task(name="noop")(lambda: None)
    queue.enqueue(task.s(id="chosen-by-the-caller"))
    figures = queue_figures(queue)
    assert figures.depth == 1 and figures.oldest_age is None


def test_a_job_due_later_is_not_yet_waiting(queues: dict[str, Huey]) -> None:
    """A job due in an hour sits in the queue until a consumer parks it: age 0, not -1 h."""
    queue = queues["enrich"]
    task = queue.task(name="noop")(lambda: None)
    task.schedule(delay=3600)
    figures = queue_figures(queue)
    assert figures.depth == 1 and figures.oldest_age == 0.0
