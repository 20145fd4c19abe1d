"""The engine delivers webhooks: the duty asks for the job, a consumer of `webhooks` runs it."""

from __future__ import annotations

import time
from pathlib import Path

from mailroom.jobs.queues import QUEUES
from mailroom.jobs.runtime import Runtime
from mailroom.store.engine import Store
from tests.helpers import drain
from tests.webhooks.support import (
    Receiver,
    hooked,
    new_mail,
)


def test_the_duty_asks_once_and_the_job_delivers(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """Ticks of the duty coalesce into one queued job, which delivers the new mail's event."""
    assert "webhooks" in QUEUES
    hook = hooked(store, tmp_path, receiver.url, mail=1)
    settings = hook.settings
    runtime = Runtime(store, settings)
    try:
        runtime.duties.tick(0.0)
        runtime.webhooks.request()  # a second ask while one waits adds nothing
        queue = runtime.queues["webhooks"]
        assert queue.pending_count() == 1
        assert drain(queue) == 1
    finally:
        runtime.stop()
    assert len(receiver.accepted_ids()) == 1


def test_a_running_consumer_delivers_without_help(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """With the supervisor's duties and a `webhooks` consumer running, new mail reaches the hook."""
    hook = hooked(store, tmp_path, receiver.url)
    settings, account = hook.settings, hook.account
    runtime = Runtime(store, settings)
    runtime.start_consumers(("webhooks",))
    runtime.start_supervisor()
    try:
        new_mail(store, account, 2)
        deadline = time.monotonic() + 60
        while len(receiver.accepted_ids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        runtime.stop()
    assert len(receiver.accepted_ids()) == 2
