"""Scraping helpers: one scrape over real HTTP, read by prometheus-client's own parser."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str, **request: object) -> Samples:
    """Every sample of one scrape of ``url``, keyed by name and labels."""
    answer = httpx.get(url, timeout=30, **request)  # type: ignore[arg-type]
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=")
    samples: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value; 0.0 when the series has not appeared yet."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def wait_for(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    """Wait until ``condition()`` holds (a busy machine runs jobs late), or fail."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the condition did not come true in time"
        time.sleep(0.05)
