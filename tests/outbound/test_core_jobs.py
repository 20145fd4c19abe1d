"""The sending jobs: woken after a commit, coalesced, paced by themselves, run by the runtime."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from huey import Huey

from mailroom.config import Settings
from mailroom.jobs.queues import make_queues
from mailroom.jobs.runtime import Runtime
from mailroom.jobs.sending import SendJobs
from mailroom.outbound import hooks
from mailroom.store.engine import Store
from tests.outbound.core_support import Clock, account_for, queue, sending_settings, subjects
from tests.support.smtp_sink import SmtpSink


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """A calm lane of 6 a minute, burst 2."""
    return sending_settings(tmp_path, lane_rates="calm=6/2")


@pytest.fixture
def jobs(store: Store, settings: Settings, clock: Clock) -> Iterator[SendJobs]:
    """The sending jobs on SQLite queues, woken after commits as the runtime wires them."""
    sending = SendJobs(store, make_queues(settings), settings, now=clock)
    hooks.WAKERS.append(sending.request)
    yield sending
    hooks.WAKERS.remove(sending.request)
    sending.close()


def _drain(queue: Huey) -> int:
    """Run the queued jobs until none is left, delayed ones into the schedule; how many ran."""
    ran = 0
    while (task := queue.dequeue()) is not None:
        if not queue.ready_to_run(task):
            queue.add_schedule(task)  # as a huey worker does
            continue
        queue.execute(task)
        ran += 1
    return ran


def _run_scheduled(queue: Huey) -> None:
    """Run the one delayed job now (the injected clock was moved past its time)."""
    [task] = queue.read_schedule(datetime.max)
    queue.execute(task, timestamp=task.eta)


def test_queueing_wakes_the_lane_once_and_the_job_paces_itself(
    store: Store, sink: SmtpSink, settings: Settings, clock: Clock, jobs: SendJobs
) -> None:
    """A commit enqueues the lane's job once; after its burst the job asks for the next token."""
    account_id = account_for(store, sink)
    calm = jobs.queues["calm"]
    for number in range(4):
        queue(store, settings, account_id, number, clock)
    assert (calm.pending_count(), jobs.queues["urgent"].pending_count()) == (1, 0)
    assert _drain(calm) == 1
    assert subjects(sink) == ["n0", "n1"]  # the burst
    [later] = calm.scheduled()
    assert later.args == ("calm",)
    for moment in range(3):  # more mail meanwhile: one job looks, coalesced
        queue(store, settings, account_id, 10 + moment, clock)
    assert calm.pending_count() == 1
    assert _drain(calm) == 1
    assert (len(sink.messages), calm.scheduled_count()) == (2, 1)  # still the one for the token
    clock.advance(10)  # one token later
    _run_scheduled(calm)
    assert subjects(sink) == ["n0", "n1", "n2"]
    [next_job] = calm.pending()  # and the next one waits for its token
    assert not calm.ready_to_run(next_job)


def test_a_scheduled_message_gets_a_delayed_job(
    store: Store, sink: SmtpSink, settings: Settings, clock: Clock, jobs: SendJobs
) -> None:
    """A message with sendAt in ten minutes enqueues no job now, one delayed to then."""
    account_id = account_for(store, sink)
    queue(store, settings, account_id, 1, clock, send_at=clock() + timedelta(minutes=10))
    calm = jobs.queues["calm"]
    [delayed] = calm.pending()
    assert not calm.ready_to_run(delayed)
    assert _drain(calm) == 0  # the delayed job goes into the schedule
    assert calm.scheduled_count() == 1
    clock.advance(600)
    _run_scheduled(calm)
    assert subjects(sink) == ["n1"]


def test_the_sweep_enqueues_lanes_with_due_work_past_a_stale_marker(
    store: Store, sink: SmtpSink, settings: Settings, clock: Clock, jobs: SendJobs
) -> None:
    """A lost job leaves its marker; the duty still enqueues the lane, and the job clears it."""
    account_id = account_for(store, sink)
    queue(store, settings, account_id, 1, clock, lane="direct")
    direct = jobs.queues["direct"]
    assert direct.dequeue() is not None  # the job is lost; its marker stays
    queue(store, settings, account_id, 2, clock, lane="direct")
    assert direct.pending_count() == 0  # coalesced into the lost one
    jobs.sweep()
    assert direct.pending_count() == 1 and jobs.queues["calm"].pending_count() == 0
    assert _drain(direct) == 1
    assert subjects(sink) == ["n1", "n2"]
    queue(store, settings, account_id, 3, clock, lane="direct")
    assert direct.pending_count() == 1  # the marker is gone


def test_urgent_overtakes_a_calm_backlog_in_the_running_engine(
    store: Store, sink: SmtpSink, tmp_path: Path
) -> None:
    """With the engine's consumers running, urgent mail leaves while calm mail still waits."""
    settings = sending_settings(tmp_path, lane_rates="calm=6/1")
    runtime = Runtime(store, settings)
    runtime.start_consumers(("send_urgent", "send_calm"))
    try:
        account_id = account_for(store, sink)
        real = Clock(start=runtime.jobs.now())
        for number in range(20):
            queue(store, settings, account_id, number, real)
        queue(store, settings, account_id, 99, real, kind="invoice")
        started = time.monotonic()
        while "n99" not in subjects(sink):
            assert time.monotonic() - started < 60, "the urgent mail did not leave"
            time.sleep(0.05)
        assert subjects(sink).index("n99") <= 2  # 6 calm a minute: the backlog is still there
    finally:
        runtime.stop()
