"""The sending jobs: one ``send_lane`` task per lane queue, woken after commits, paced by itself.

A job runs :meth:`~mailroom.outbound.sender.Sender.run_lane` for a slice of at
most :data:`SLICE` submissions, then asks for itself again: at once while due
mail is left, else for the moment the lane next has work (the next token of
its bucket, a retry's pause, a scheduled ``sendAt``). Asking coalesces like
the propagate job does: while an immediate job of a lane is queued and not
started (a marker in the queue's storage) no second one is enqueued, and a
delayed one is only added when it is due earlier than the one already waiting
(its marker names that job, which clears it when it starts; a marker over a
minute past its time is taken for a lost job).

Wakers: :func:`mailroom.outbound.queueing.queue_message` commits, then
:meth:`SendJobs.request` (registered in :data:`mailroom.outbound.hooks.WAKERS`
by the runtime) enqueues the lane's job — delayed to ``sendAt`` for a
scheduled message. The runtime's periodic duty (:meth:`SendJobs.sweep`)
enqueues every lane with due work directly, healing a lost job or marker.
Running two jobs of one lane at once is harmless: claims are guarded. A
command that queues mail in its own process (``mailroom send``, ``mailroom
outbound retry``) wakes the engine's workers the same way inside
:func:`waking`, through the queues they share.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime

from huey import Huey
from huey.api import Task, TaskWrapper

from mailroom.config import Settings, load_settings
from mailroom.jobs.queues import make_queues
from mailroom.outbound import hooks
from mailroom.outbound.lanes import LANES
from mailroom.outbound.sender import Sender
from mailroom.store.engine import Store
from mailroom.store.models import utcnow

__all__ = ["SLICE", "SendJobs", "queue_name", "waking"]

log = logging.getLogger(__name__)

SLICE = 200  # submissions per job, so a long backlog never holds a worker thread for long
LOST_AFTER = 60.0  # seconds past its time after which a delayed job's marker is stale


def queue_name(lane: str) -> str:
    """The queue of a lane (:mod:`mailroom.outbound.lanes`): ``send_`` + the lane."""
    return f"send_{lane}"


def _now_marker(lane: str) -> str:
    return f"send-queued:{lane}"


def _later_marker(lane: str) -> str:
    return f"send-later:{lane}"


class SendJobs:
    """The ``send_lane`` tasks of one process and the asking that schedules them."""

    def __init__(
        self,
        store: Store,
        queues: dict[str, Huey],
        settings: Settings | None = None,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self.store = store
        self.queues = {lane: queues[queue_name(lane)] for lane in LANES}
        self.settings = settings
        self.now = now
        self.tasks: dict[str, TaskWrapper] = {
            lane: queue.task(name="send_lane", context=True)(self.run)
            for lane, queue in self.queues.items()
        }
        self._sender: Sender | None = None
        self._lock = threading.Lock()

    @property
    def sender(self) -> Sender:
        """The lane worker, made on first use (it opens the pace's connections)."""
        with self._lock:
            if self._sender is None:
                settings = self.settings or load_settings()
                self._sender = Sender(self.store, settings, clock=self.now)
            return self._sender

    def close(self) -> None:
        """Release the lane worker's connections."""
        with self._lock:
            sender, self._sender = self._sender, None
        if sender is not None:
            sender.close()

    def request(self, lanes: Mapping[str, datetime]) -> None:
        """Enqueue each lane's job for when it is due (the after-commit waker; never raises)."""
        for lane, due in lanes.items():
            try:
                self._ask(lane, (due - self.now()).total_seconds())
            except Exception:  # the commit stands; the duty enqueues it instead
                log.exception("Could not enqueue the sending job of lane %s", lane)

    def _ask(self, lane: str, delay: float) -> None:
        queue = self.queues[lane]
        if delay <= 0:
            if queue.put_if_empty(_now_marker(lane), 1):
                self.tasks[lane](lane)
            return
        at = time.time() + delay
        waiting = queue.get(_later_marker(lane), peek=True)
        if isinstance(waiting, tuple) and time.time() - LOST_AFTER < waiting[1] <= at:
            return  # a job due no later than this one already waits
        job_id = uuid.uuid4().hex
        queue.put(_later_marker(lane), (job_id, at))
        self.tasks[lane].schedule((lane,), delay=delay, id=job_id)

    def run(self, lane: str, task: Task | None = None) -> int:
        """One slice of the lane's work, then ask again for what is left; how many went."""
        queue = self.queues[lane]
        queue.delete(_now_marker(lane))  # from now on a request enqueues anew
        waiting = queue.get(_later_marker(lane), peek=True)
        if task is not None and isinstance(waiting, tuple) and waiting[0] == task.id:
            queue.delete(_later_marker(lane))  # that delayed job is this one
        sender = self.sender
        handed = sender.run_lane(lane, limit=SLICE)
        due = sender.next_due(lane)
        if due is not None:
            delay = max((due - self.now()).total_seconds(), sender.lane_pause.get(lane, 0.0))
            self._ask(lane, delay)
        return handed

    def sweep(self) -> None:
        """Enqueue the job of every lane with due work, past any marker (the duty)."""
        for lane in self.sender.lanes_with_work():
            self.tasks[lane](lane)


@contextmanager
def waking(store: Store, settings: Settings) -> Iterator[SendJobs]:
    """Within the block, each commit that queues mail enqueues its lane's job (a CLI process)."""
    jobs = SendJobs(store, make_queues(settings), settings)
    hooks.WAKERS.append(jobs.request)
    try:
        yield jobs
    finally:
        hooks.WAKERS.remove(jobs.request)
        jobs.close()
