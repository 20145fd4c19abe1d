"""/metrics of the whole application over real HTTP, read by prometheus-client's parser."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mailroom.config import Settings
from mailroom.jobs.runtime import Runtime
from mailroom.store.engine import Store
from mailroom.web.app import create_app
from tests.jmap.conftest import serve
from tests.metrics.scraping import scrape, value, wait_for
from tests.web.conftest import PASSWORD, add_user

ECHO = {
    "using": ["urn:ietf:params:jmap:core"],
    "methodCalls": [["Core/echo", {"a": 1}, "c0"], ["Made/up", {}, "c1"]],
}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Embedded settings: the queues in a private data dir."""
    return Settings(data_dir=tmp_path / "data")


@pytest.fixture
def runtime(store: Store, settings: Settings) -> Iterator[Runtime]:
    """The engine of the served process, with a consumer for the ``ingest`` queue only."""
    engine = Runtime(store, settings)
    engine.start_consumers(("ingest",))
    yield engine
    engine.stop()


@pytest.fixture
def base(store: Store, settings: Settings, runtime: Runtime) -> Iterator[str]:
    """The application (pages, JMAP, /metrics) over http on a free loopback port."""
    yield from serve(create_app(store, settings=settings))


def test_scrape_parses_and_moves_with_a_job_and_a_jmap_call(
    store: Store, runtime: Runtime, base: str
) -> None:
    """A job run and JMAP calls move their series between two parsed scrapes."""
    add_user(store, "alice")
    before = scrape(f"{base}/metrics")
    job = ("mailroom_jobs_total", {"queue": "ingest", "task": "wake_snoozed"})
    call = ("mailroom_jmap_call_seconds_count", {"method": "Core/echo"})

    runtime.jobs.wake_snoozed()
    answer = httpx.post(f"{base}/jmap/api", json=ECHO, auth=("alice", PASSWORD), timeout=30)
    assert answer.status_code == 200, answer.text
    wait_for(
        lambda: (
            value(scrape(f"{base}/metrics"), job[0], outcome="done", **job[1])
            > value(before, job[0], outcome="done", **job[1])
        )
    )
    after = scrape(f"{base}/metrics")
    assert value(after, call[0], **call[1]) == value(before, call[0], **call[1]) + 1
    unknown = value(after, call[0], method="unknown") - value(before, call[0], method="unknown")
    assert unknown == 1  # a client's made-up method name never becomes a label
    assert value(after, call[0], method="Made/up") == 0
    assert value(after, "mailroom_http_responses_total", part="jmap", code="200") > value(
        before, "mailroom_http_responses_total", part="jmap", code="200"
    )
    assert value(after, "mailroom_job_wait_seconds_count", queue="ingest") > value(
        before, "mailroom_job_wait_seconds_count", queue="ingest"
    )


def test_store_view_reports_queues_and_accounts_without_user_data(
    store: Store, runtime: Runtime, base: str
) -> None:
    """A job nobody consumes shows as depth 1 with an age; accounts count by status; no names."""
    add_user(store, "alice-the-private")
    runtime.jobs.follow_up["enrich_backlog"]([1])  # no consumer for this queue here
    samples = scrape(f"{base}/metrics")
    assert value(samples, "mailroom_queue_depth", queue="enrich_backlog") == 1
    age = value(samples, "mailroom_queue_oldest_job_age_seconds", queue="enrich_backlog")
    assert 0 <= age < 600
    assert value(samples, "mailroom_queue_depth", queue="ingest_backlog") == 0
    for part in ("queues", "accounts", "outbound"):
        assert value(samples, "mailroom_collector_up", part=part) == 1
    assert ("mailroom_accounts", frozenset({("status", "active")})) in samples
    assert (
        "mailroom_outbound_submissions",
        frozenset({("lane", "calm"), ("state", "queued")}),
    ) in samples
    assert value(samples, "process_resident_memory_bytes") > 0
    text = httpx.get(f"{base}/metrics", timeout=30).text
    assert "alice-the-private" not in text


def test_every_metric_the_docs_and_alerts_name_is_served(base: str) -> None:
    """docs/operations.md and deploy/prometheus/alerts.yml name only metrics a scrape has."""
    answer = httpx.get(f"{base}/metrics", timeout=30)
    served = set()
    for family in text_string_to_metric_families(answer.text):
        served.add(family.name)
        served.update(sample.name for sample in family.samples)
    root = Path(__file__).resolve().parents[2]
    docs = (root / "docs/operations.md").read_text()
    section = docs[docs.index("## Health, readiness and metrics") : docs.index("## Sizing")]
    alerts = (root / "deploy/prometheus/alerts.yml").read_text()
    named = set(re.findall(r"\b(mailroom_[a-z_]+|process_[a-z_]+)", section + alerts))
    assert len(named) > 15
    missing = sorted(
        name
        for name in named
        if name not in served and re.sub(r"_(total|bucket|count|sum)$", "", name) not in served
    )
    assert missing == []
