"""Who may scrape: the address allow-list and the bearer token, on serve and on a worker."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from mailroom.config import SecretStr, Settings
from mailroom.errors import ConfigError
from mailroom.metrics.access import ScrapeAccess
from mailroom.store.engine import Store
from mailroom.web.app import create_app
from tests.jmap.conftest import serve
from tests.metrics.scraping import scrape, value

TOKEN = "scrape-token-for-tests"


def test_the_gate_checks_address_then_token() -> None:
    """Allowed networks (IPv4-mapped too) pass; with a token set only its bearer does."""
    open_gate = ScrapeAccess.from_settings(Settings(metrics_allow="10.0.0.0/8, ::1"))
    assert open_gate.permits("10.1.2.3", None)
    assert open_gate.permits("::ffff:10.1.2.3", None)
    assert open_gate.permits("::1", None)
    assert not open_gate.permits("192.168.1.1", None)
    assert not open_gate.permits(None, None)
    closed = ScrapeAccess.from_settings(Settings(metrics_token=SecretStr(TOKEN)))
    assert closed.permits("127.0.0.1", f"Bearer {TOKEN}")
    assert not closed.permits("127.0.0.1", None)
    assert not closed.permits("127.0.0.1", "Bearer wrong")
    assert not closed.permits("10.0.0.1", f"Bearer {TOKEN}")  # the address still counts
    with pytest.raises(ConfigError, match="MAILROOM_METRICS_ALLOW: 'nowhere'"):
        ScrapeAccess.from_settings(Settings(metrics_allow="nowhere"))


def test_serve_refuses_scrapes_the_gate_does_not_admit(store: Store, tmp_path: Path) -> None:
    """Loopback outside the allow-list gets 403; with a token, only its bearer gets metrics."""
    elsewhere = Settings(data_dir=tmp_path, metrics_allow="10.0.0.0/8")
    server = serve(create_app(store, settings=elsewhere))
    base = next(server)
    try:
        assert httpx.get(f"{base}/metrics", timeout=30).status_code == 403
    finally:
        server.close()
    tokened = Settings(data_dir=tmp_path, metrics_token=SecretStr(TOKEN))
    server = serve(create_app(store, settings=tokened))
    base = next(server)
    try:
        assert httpx.get(f"{base}/metrics", timeout=30).status_code == 403
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        samples = scrape(f"{base}/metrics", headers=bearer)
        assert value(samples, "mailroom_http_responses_total", part="web", code="403") >= 1
    finally:
        server.close()


def test_a_worker_answers_scrapes_on_its_own_port(tmp_path: Path) -> None:
    """``mailroom worker --metrics-listen 127.0.0.1:0`` serves its process metrics, gated."""
    env = {
        **os.environ,
        "MAILROOM_DATA_DIR": str(tmp_path / "data"),
        "MAILROOM_METRICS_TOKEN": TOKEN,
    }
    command = [sys.executable, "-m", "mailroom", "worker", "--queues", "release"]
    with subprocess.Popen(
        [*command, "--metrics-listen", "127.0.0.1:0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            assert process.stderr is not None
            deadline, url = time.monotonic() + 60, None
            while url is None and time.monotonic() < deadline:
                line = process.stderr.readline()
                found = re.search(r"Metrics on (http://\S+/metrics)", line)
                url = found.group(1) if found else None
                if not line and process.poll() is not None:
                    break
            assert url is not None, "the worker did not say where its metrics are"
            assert httpx.get(url, timeout=30).status_code == 403
            samples = scrape(url, headers={"Authorization": f"Bearer {TOKEN}"})
            assert value(samples, "process_resident_memory_bytes") > 0
            assert ("mailroom_watches", frozenset()) in samples
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=60) == 0
        finally:
            if process.poll() is None:
                process.kill()


def test_a_bad_metrics_address_is_one_sentence(tmp_path: Path) -> None:
    """A malformed --metrics-listen ends the worker at once with a plain sentence."""
    env = {**os.environ, "MAILROOM_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run(
        [sys.executable, "-m", "mailroom", "worker", "--metrics-listen", "nowhere"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "The metrics address 'nowhere' is not HOST:PORT" in done.stderr
    assert "Traceback" not in done.stderr
