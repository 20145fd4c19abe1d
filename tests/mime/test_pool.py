"""The parse pool: worker processes give the same records as parsing inline, and never lose one."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mailroom.mime import parse_message
from mailroom.mime.pool import PARALLEL_FROM, WORKER_NICENESS, ParsePool
from tests.mime.samples import all_samples, message

ITEMS = [(raw, None) for raw in all_samples()] + [
    (message(f"Subject: number {n}\nFrom: a@example.org"), None) for n in range(20)
]


def _wait_until_started(pool: ParsePool) -> None:
    deadline = time.monotonic() + 30
    while not pool.up():
        assert time.monotonic() < deadline, "the parse workers did not start"
        time.sleep(0.01)


def test_small_jobs_parse_inline() -> None:
    with ParsePool(PARALLEL_FROM - 1, workers=2) as pool:
        assert pool._pool is None
        assert pool.result(pool.submit(ITEMS), ITEMS) == [parse_message(r) for r, _ in ITEMS]


def test_workers_parse_like_the_calling_process() -> None:
    with ParsePool(PARALLEL_FROM, workers=2) as pool:
        _wait_until_started(pool)
        futures = [pool.submit(ITEMS[i : i + 5]) for i in range(0, len(ITEMS), 5)]
        parsed = [m for i, f in enumerate(futures) for m in pool.result(f, ITEMS[i * 5 :][:5])]
    assert parsed == [parse_message(raw) for raw, _ in ITEMS]


def test_workers_make_blind_index_entries_like_the_calling_process() -> None:
    """A sealing import has the workers make the blind index entries too (same keys,
    same token words and new words: the per-process word cache and hash order change
    nothing)."""
    from mailroom.crypto.blind_tokens import TokenKeys
    from mailroom.mime.pool import parse_all

    keys = TokenKeys(3, os.urandom(32), os.urandom(32))
    with ParsePool(PARALLEL_FROM, workers=2) as pool:
        _wait_until_started(pool)
        parsed = pool.result(pool.submit(ITEMS, keys), ITEMS)
    inline = parse_all(ITEMS, keys)
    assert [m.blind_entry for m in parsed] == [m.blind_entry for m in inline]
    assert all(m.blind_entry is not None and m.blind_entry[0] == 3 for m in parsed)
    assert any(m.blind_entry and m.blind_entry[2] for m in parsed)
    other = parse_all(ITEMS, TokenKeys(3, os.urandom(32), os.urandom(32)))
    assert [m.blind_entry for m in other] != [m.blind_entry for m in inline]


@pytest.mark.parametrize("yielding", [True, False])
def test_workers_yield_the_cpu_to_the_caller_unless_it_waits_for_them(yielding: bool) -> None:
    """Parse workers run at a lower priority than the writer; a lane (yielding=False) does not."""
    mine = os.nice(0)
    with ParsePool(PARALLEL_FROM, workers=1, yielding=yielding) as pool:
        _wait_until_started(pool)
        future = pool.call(os.nice, 0)
        assert future is not None
        theirs = future.result()
    assert theirs == (min(mine + WORKER_NICENESS, 19) if yielding else mine)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_killed_worker_costs_no_message() -> None:
    with ParsePool(PARALLEL_FROM, workers=1) as pool:
        _wait_until_started(pool)
        assert pool._pool is not None
        for process in list(pool._pool._processes.values()):
            os.kill(process.pid, signal.SIGKILL)
        first = pool.submit(ITEMS)  # submitted before or after the pool notices; either way
        assert pool.result(first, ITEMS) == [parse_message(r) for r, _ in ITEMS]
        second = pool.submit(ITEMS)
        assert pool.result(second, ITEMS) == [parse_message(r) for r, _ in ITEMS]


def test_workers_do_not_run_the_main_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    script = tmp_path / "entry.py"
    script.write_text("raise SystemExit('a worker imported the main script')\n")
    monkeypatch.setattr(sys.modules["__main__"], "__file__", str(script), raising=False)
    with ParsePool(PARALLEL_FROM, workers=1) as pool:
        _wait_until_started(pool)
        assert pool._started[0].result() is True
        parsed = pool.result(pool.submit(ITEMS), ITEMS)
    assert parsed == [parse_message(raw) for raw, _ in ITEMS]
    assert "worker" not in caplog.text  # parsed by the worker, not by the fallback
    assert sys.modules["__main__"].__file__ == str(script)  # put back after the start


def test_the_pool_starts_its_workers_without_making_the_caller_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """While the workers are still starting the constructor has returned; batches parse inline."""
    from concurrent.futures import ProcessPoolExecutor

    release = threading.Event()
    original = ProcessPoolExecutor.submit

    def slow_start(self: ProcessPoolExecutor, fn: Any, /, *args: Any) -> Any:
        release.wait(30)  # the forkserver taking its time to import
        return original(self, fn, *args)

    monkeypatch.setattr(ProcessPoolExecutor, "submit", slow_start)
    with ParsePool(PARALLEL_FROM, workers=1) as pool:
        assert not pool.up()
        inline = pool.submit(ITEMS[:3])
        assert inline.done()  # parsed here, at once
        assert inline.result() == [parse_message(r) for r, _ in ITEMS[:3]]
        release.set()
        _wait_until_started(pool)
        assert pool.call(os.getpid) is not None  # the workers take work now
