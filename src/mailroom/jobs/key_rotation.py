"""The owner key rotation job: ``rotate_owner_key`` on ``enrich_backlog``, one batch per job.

``mailroom keys rotate-owner USER`` starts a rotation
(:mod:`mailroom.crypto.owner_rotation`) and asks for its job; the running
engine (``mailroom serve``, or ``mailroom worker`` serving ``enrich_backlog``)
re-encrypts in the background. A job runs one batch of one rotation
(:meth:`~mailroom.crypto.owner_rotation.Rotator.run_batch`, one transaction)
and asks for the next while the rotation is not done, so a long rotation takes
turns with the other backlog work on the queue.

Asking coalesces like the webhook job: a marker in the queue's storage says
"a job for this rotation is queued and not started", holding the time it was
put there. The runtime's duty (every :data:`INTERVAL` seconds) asks for every
running rotation: one whose job was lost with its worker (killed between
batches, a queue that was emptied) is queued again; a marker older than
:data:`STALE_AFTER` is taken for a lost job too. One job per rotation runs at
a time (a lease); a second one returns at once. Batches are idempotent (a
value under the new version is skipped), so a job run twice changes nothing
twice.

The key wrapper comes from the store's sealing (``store.sealing``,
:mod:`mailroom.crypto.sealing`); a store opened without keys cannot rotate, and
says so in the log once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from huey import Huey
from huey.api import TaskWrapper

from mailroom.crypto.owner_rotation import Rotator, pending_rotations
from mailroom.jobs.leases import Leases
from mailroom.store.engine import Store
from mailroom.store.models import utcnow

__all__ = ["BATCH", "INTERVAL", "QUEUE", "STALE_AFTER", "KeyRotationJobs"]

log = logging.getLogger(__name__)

QUEUE = "enrich_backlog"
BATCH = 500  # values re-encrypted per job (one transaction)
INTERVAL = 60.0  # seconds between the duty's looks at running rotations
STALE_AFTER = timedelta(minutes=15)  # a marker this old stands for a lost job
LEASE_SECONDS = 600.0  # one batch per job; the lease outlives any sane batch


class KeyRotationJobs:
    """The ``rotate_owner_key`` task of one process, the asking and the duty."""

    def __init__(
        self,
        store: Store,
        queues: dict[str, Huey],
        leases: Leases,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self.store = store
        self.queue = queues[QUEUE]
        self.leases = leases
        self.now = now
        self.task: TaskWrapper = self.queue.task(
            name="rotate_owner_key", retries=2, retry_delay=60
        )(self.run)
        self._said_no_key = False

    def request(self, rotation_id: int, batch: int = BATCH) -> bool:
        """Enqueue a batch of the rotation unless one is queued and not started; whether it did.

        ``batch``: values re-encrypted per job, this one and those it asks for.

        A marker older than :data:`STALE_AFTER` counts as a lost job: it is replaced
        and the job queued again (a duplicate is harmless, see the module).
        """
        marker = _marker(rotation_id)
        stamp = self.now().isoformat()
        if not self.queue.put_if_empty(marker, stamp):
            queued_at = self.queue.get(marker, peek=True)
            if isinstance(queued_at, str) and self.now() - _parse(queued_at) < STALE_AFTER:
                return False
            self.queue.put(marker, stamp)
            log.info("The job of key rotation %s was lost; queuing it again.", rotation_id)
        self.task(rotation_id, batch)
        return True

    def duty(self) -> None:
        """The runtime's periodic duty (see :meth:`sweep`)."""
        self.sweep()

    def sweep(self) -> list[int]:
        """The duty: ask for a job for every running rotation; the ids queued now."""
        with self.store.session() as session:
            running = pending_rotations(session)
        queued = []
        for rotation_id in running:
            try:
                if self.request(rotation_id):
                    queued.append(rotation_id)
            except Exception:  # the next sweep asks again
                log.exception("Could not queue key rotation %s", rotation_id)
        return queued

    def run(self, rotation_id: int, batch: int = BATCH) -> bool:
        """One batch of the rotation, then ask for the next unless it is done; True when done."""
        self.queue.delete(_marker(rotation_id))  # from now on a request enqueues anew
        sealing = self.store.sealing
        if sealing is None:
            if not self._said_no_key:
                log.warning(
                    "Key rotation %s waits: this process has no key to open owners' data keys; "
                    "set MAILROOM_MASTER_KEY_FILE (or MAILROOM_KEY_WRAPPER) for it.",
                    rotation_id,
                )
                self._said_no_key = True
            return False
        key = f"key-rotation:{rotation_id}"
        token = self.leases.acquire(key, LEASE_SECONDS)
        if token is None:
            return False  # another job runs this rotation; it asks for the next batch
        try:
            done = Rotator(self.store, sealing.wrapper, batch).run_batch(rotation_id)
        finally:
            self.leases.release(key, token)
        if done:
            log.info("Key rotation %s is done; the old data key version is deleted.", rotation_id)
        else:
            self.request(rotation_id, batch)
        return done


def _marker(rotation_id: int) -> str:
    """The queue-storage key saying "a job for this rotation waits to start"."""
    return f"key-rotation-queued:{rotation_id}"


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)
