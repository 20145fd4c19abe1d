"""The webhook job: ``deliver_webhooks`` on the ``webhooks`` queue, asked for every few seconds.

The runtime's duty (every :data:`INTERVAL` seconds, in ``mailroom serve`` or
``mailroom supervisor``) asks for the job; asking coalesces like the propagate
job does (a marker in the queue's storage while one is queued and not
started). A job runs one round of :class:`mailroom.webhooks.worker.WebhookWorker`
— derive new deliveries, deliver the due ones — and asks again at once while
work is left. Several workers (``mailroom worker --queues webhooks`` on many
machines) are safe: deriving takes the cursor's lock, delivering a lease.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from huey import Huey
from huey.api import TaskWrapper

from mailroom.config import Settings, load_settings
from mailroom.errors import ConfigError
from mailroom.store.engine import Store
from mailroom.store.models import utcnow
from mailroom.webhooks.worker import WebhookWorker

__all__ = ["INTERVAL", "QUEUE", "WebhookJobs"]

log = logging.getLogger(__name__)

QUEUE = "webhooks"
INTERVAL = 5.0  # seconds between the duty's requests
_MARKER = "webhooks-queued"


class WebhookJobs:
    """The ``deliver_webhooks`` task of one process and the asking that schedules it."""

    def __init__(
        self,
        store: Store,
        queues: dict[str, Huey],
        settings: Settings | None = None,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self.store = store
        self.queue = queues[QUEUE]
        self.settings = settings
        self.now = now
        self.task: TaskWrapper = self.queue.task(name="deliver_webhooks")(self.run)
        self._worker: WebhookWorker | None = None
        self._lock = threading.Lock()
        self._said: str | None = None

    @property
    def worker(self) -> WebhookWorker:
        """The worker, made on first use (it opens an HTTP client)."""
        with self._lock:
            if self._worker is None:
                settings = self.settings or load_settings()
                self._worker = WebhookWorker(self.store, settings, clock=self.now)
            return self._worker

    def request(self) -> None:
        """Enqueue a round unless one is queued and not started (the duty; never raises)."""
        try:
            if self.queue.put_if_empty(_MARKER, 1):
                self.task()
        except Exception:  # the next request enqueues it
            log.exception("Could not enqueue the webhook deliveries")

    def run(self) -> int:
        """One round; how many deliveries were attempted."""
        self.queue.delete(_MARKER)  # from now on a request enqueues anew
        try:
            done = self.worker.run_once()
        except ConfigError as exc:  # no master key: said once, until it changes
            if str(exc) != self._said:
                log.warning("Webhooks cannot be delivered: %s", exc)
                self._said = str(exc)
            return 0
        self._said = None
        if done.more:
            self.request()
        return done.attempts

    def close(self) -> None:
        """Close the worker's connections."""
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker.close()
