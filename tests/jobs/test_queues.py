"""Queue names: the worker accepts every registered queue and refuses a typo at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.jobs.queues import QUEUES, make_queues, parse_queue_list


def test_parse_queue_list_accepts_the_send_queues() -> None:
    """The per-lane send queues are queues like the others; ``all`` includes them."""
    assert parse_queue_list("send_calm, send_urgent") == ("send_calm", "send_urgent")
    assert {"send_urgent", "send_calm", "send_direct"} <= set(parse_queue_list("all"))
    assert parse_queue_list("all") == QUEUES


def test_parse_queue_list_refuses_an_unknown_name() -> None:
    """A name that is not a queue is a ConfigError that lists the queues."""
    with pytest.raises(ConfigError, match="'send_later'.*send_direct"):
        parse_queue_list("ingest,send_later")


def test_make_queues_builds_the_send_queues(tmp_path: Path) -> None:
    """The send queues get a huey each, in the data dir's queue file like the others."""
    queues = make_queues(Settings(data_dir=tmp_path), ("send_urgent", "send_calm", "send_direct"))
    assert sorted(queues) == ["send_calm", "send_direct", "send_urgent"]
    assert (tmp_path / "queues.sqlite3").exists()


def _worker(tmp_path: Path, queues: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mailroom", "worker", "--queues", queues],
        env={**os.environ, "MAILROOM_DATA_DIR": str(tmp_path / "data")},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_worker_serves_a_send_queue_and_stops_on_sigterm(tmp_path: Path) -> None:
    """``mailroom worker --queues send_calm`` starts serving it and exits cleanly on SIGTERM."""
    with _worker(tmp_path, "send_calm") as process:
        try:
            assert process.stderr is not None
            deadline = time.monotonic() + 60
            line = ""
            while time.monotonic() < deadline and "serving" not in line:
                line = process.stderr.readline()
                if not line and process.poll() is not None:
                    break
            assert "mailroom worker is serving send_calm." in line
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=60) == 0
        finally:
            if process.poll() is None:
                process.kill()


def test_worker_refuses_an_unknown_queue_in_one_sentence(tmp_path: Path) -> None:
    """An unknown queue name ends the worker at once with one plain sentence, no traceback."""
    with _worker(tmp_path, "send_later") as process:
        _, err = process.communicate(timeout=60)
    assert process.returncode == 1
    assert "There is no queue called 'send_later'" in err and "send_calm" in err
    assert "Traceback" not in err
