"""A worker process killed mid-send: nothing the server had accepted is ever sent twice."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

from mailroom.outbound.sender import HANDOFF_TIMEOUT, Sender
from mailroom.store.engine import Store
from mailroom.store.models import utcnow
from tests.outbound.core_support import (
    Clock,
    account_for,
    failed,
    queue,
    sending_settings,
    subjects,
    submission,
)
from tests.support.smtp_sink import SmtpSink

WORKER = """
import sys
from pathlib import Path
from mailroom.config import Settings
from mailroom.outbound.sender import Sender
from mailroom.store.engine import open_store

store = open_store(sys.argv[1], Path(sys.argv[2]), migrate=False)
settings = Settings(data_dir=Path(sys.argv[2]), allowed_private_hosts="127.0.0.1")
Sender(store, settings).run_lane("direct")
"""


def test_killed_worker_sends_nothing_twice(store: Store, tmp_path: Path) -> None:
    """Killed (SIGKILL) while the sink holds its reply, the hand-off is never repeated."""
    settings = sending_settings(tmp_path)
    clock = Clock(utcnow())
    with SmtpSink() as sink:
        account_id = account_for(store, sink)
        first = queue(store, settings, account_id, 1, clock, lane="direct")
        second = queue(store, settings, account_id, 2, clock, lane="direct")
        sink.hold()
        url = store.engine.url.render_as_string(hide_password=False)
        worker = subprocess.Popen([sys.executable, "-c", WORKER, url, str(tmp_path)])
        try:
            started = time.monotonic()
            while not sink.messages:
                assert worker.poll() is None, "the worker ended before handing over"
                assert time.monotonic() - started < 120, "the worker never handed over"
                time.sleep(0.02)
            row = submission(store, first)
            assert row.state == "sending" and row.handoff_at is not None  # committed before
            os.kill(worker.pid, signal.SIGKILL)
        finally:
            worker.wait(timeout=60)
        assert worker.returncode == -signal.SIGKILL
        sink.release()
        later = Clock(row.handoff_at + HANDOFF_TIMEOUT + timedelta(seconds=1))
        sender = Sender(store, settings, clock=later)
        assert sender.run_lane("direct") == 1  # the second message only
        sender.close()
        assert subjects(sink) == ["n1", "n2"]  # each once
    assert submission(store, second).state == "sent"
    assert submission(store, first).state == "failed"
    [entry] = failed(store)
    assert entry.submission_id == first and "may have accepted it" in entry.reason
