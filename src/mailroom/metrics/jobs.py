"""Jobs seen by metrics: when each was enqueued, what came of it, how deep each queue is.

A huey message records no enqueue time, and a queue's age is what an operator
must see (a full queue that moves is fine, a small one that sits is not). So
every task this program enqueues gets a UUIDv7 id (RFC 9562 §5.7): the same
36-character form as huey's own UUIDv4, whose first 48 bits are the Unix time
in milliseconds. A job's start time is then its due time (``eta``: scheduled
jobs and retries) or the time in its id. Old processes read such ids like any
other, and ids given by the caller (``schedule(id=...)``) are left alone: for
those only the due time is known, and the age of an immediate one is unknown.

:func:`instrument` is called by :func:`mailroom.jobs.queues.make_queues` for
every queue: it installs the id and counts jobs done and failed (huey's
``complete`` and ``error`` signals, in the consumer's process) and their wait.
:func:`queue_figures` reads, per queue, the depth, the jobs scheduled for
later and the age of the job at the head (the next to run, the oldest: huey's
queues are FIFO) — one cheap look at each queue's storage, SQLite or Redis.
"""

from __future__ import annotations

import secrets
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from huey import Huey, signals
from huey.api import Task, TaskWrapper

from mailroom.metrics import catalogue

_MS_BITS = 48
_MS_MASK = (1 << _MS_BITS) - 1


def uuid7(now: float | None = None) -> str:
    """A UUIDv7 for ``now`` (Unix seconds; default the current time): time, then 74 random bits."""
    ms = int((time.time() if now is None else now) * 1000) & _MS_MASK
    rand = secrets.randbits(74)
    value = (ms << 80) | (0x7 << 76) | ((rand >> 62) << 64) | (0b10 << 62) | (rand & (2**62 - 1))
    return str(uuid.UUID(int=value))


def enqueued_at(task_id: str) -> float | None:
    """The Unix time a UUIDv7 task id was made at; None for any other id."""
    try:
        parsed = uuid.UUID(task_id)
    except (ValueError, TypeError, AttributeError):
        return None
    if parsed.version != 7:
        return None
    return (parsed.int >> 80) / 1000.0


class StampedTask(Task):  # type: ignore[misc]
    """A huey task whose id says when it was made (see the module docstring)."""

    def create_id(self) -> str:
        """A UUIDv7 instead of huey's UUIDv4."""
        return uuid7()


class StampedTaskWrapper(TaskWrapper):  # type: ignore[misc]
    """Task wrapper whose tasks are :class:`StampedTask`."""

    task_base = StampedTask


def _started_at(task_id: Any, eta: datetime | None) -> float | None:
    """When the job became runnable: its due time, else the time in its id."""
    if eta is not None:
        return (eta if eta.tzinfo else eta.replace(tzinfo=UTC)).timestamp()
    return enqueued_at(task_id) if isinstance(task_id, str) else None


def instrument(name: str, queue: Huey) -> None:
    """Stamp the queue's task ids and count its jobs (idempotent per queue object)."""
    if getattr(queue, "_mailroom_metrics", False):
        return
    queue._mailroom_metrics = True
    queue.task_wrapper_class = StampedTaskWrapper

    def executing(_signal: str, task: Task) -> None:
        started = _started_at(task.id, task.eta)
        if started is not None:
            catalogue.job_started(name, time.time() - started)

    def complete(_signal: str, task: Task) -> None:
        catalogue.job_finished(name, task.name, failed=False)

    def error(_signal: str, task: Task, _exc: BaseException | None = None) -> None:
        catalogue.job_finished(name, task.name, failed=True)

    queue.signal(signals.SIGNAL_EXECUTING)(executing)
    queue.signal(signals.SIGNAL_COMPLETE)(complete)
    queue.signal(signals.SIGNAL_ERROR)(error)


@dataclass(frozen=True)
class QueueFigures:
    """One queue as a scrape sees it."""

    depth: int
    scheduled: int
    oldest_age: float | None  # seconds; 0.0 when empty, None when the head's age is unknown


def queue_figures(queue: Huey, now: float | None = None) -> QueueFigures:
    """Depth, scheduled jobs and the head job's age of one queue (raises if unreachable)."""
    storage = queue.storage
    depth = int(storage.queue_size())
    scheduled = int(storage.schedule_size())
    if depth == 0:
        return QueueFigures(0, scheduled, 0.0)
    head = storage.enqueued_items(limit=1)
    age = None
    if head:
        message = queue.serializer.deserialize(head[0])
        started = _started_at(message.id, message.eta)
        if started is not None:
            age = max(0.0, (time.time() if now is None else now) - started)
    return QueueFigures(depth, scheduled, age)
