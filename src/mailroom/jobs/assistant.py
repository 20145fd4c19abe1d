"""The assistant's jobs: classify, release, sweep, catch up (SPEC §9; ``mailroom.assistant``).

* ``assistant_classify`` on ``enrich_live``: one job per held message (so a
  slow answer holds up no other message when the queue has several workers),
  enqueued by the ``assistant`` ingest step after the batch committed.
* ``release_held`` on ``release``: enqueued at the same moment with a delay
  of ``hold_max_seconds``; its own queue and worker, because the live worker
  may be inside exactly the call that takes too long, and a release must wait
  neither for it nor for a send. Usually it finds nothing held any more.
* ``sweep_held`` on ``release``, asked for every minute by the runtime's duty:
  releases whatever is held past ``hold_max_seconds`` (a lost job, a restart).
* ``assistant_classify`` on ``enrich_backlog``: the catch-up every 15 minutes
  (:mod:`mailroom.assistant.catchup`); before each call it looks at
  ``enrich_live`` and, while live work waits there, puts the rest of its
  batch back with a short delay — live mail waits behind one call at most.

The three releasers end a hold through the one releaser
(:func:`mailroom.assistant.release.release`). Tasks are thin: they load ids
and call the assistant's services.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime

from huey import Huey
from huey.api import TaskWrapper

from mailroom.assistant import catchup
from mailroom.assistant.base import Classifier
from mailroom.assistant.classify import classify_messages
from mailroom.assistant.config import AssistantConfig, make_classifier
from mailroom.assistant.hold import ACTIVE, HoldPolicy
from mailroom.assistant.release import overdue, release, still_held
from mailroom.config import Settings
from mailroom.ingest.model import BatchResult
from mailroom.ingest.routing import BACKLOG, LIVE
from mailroom.store.engine import Store

log = logging.getLogger(__name__)

QUEUE = "release"
SWEEP_INTERVAL = 60.0  # seconds between safety sweeps
YIELD_DELAY = 5  # seconds a backlog batch waits when live mail is queued


class AssistantJobs:
    """The assistant's tasks on the queues of one process, its step and its duties."""

    def __init__(
        self,
        store: Store,
        queues: dict[str, Huey],
        settings: Settings,
        now: Callable[[], datetime],
        classifier: Classifier | None = None,
        config: AssistantConfig | None = None,
    ) -> None:
        """``config``: the settings' assistant part when the caller checked it already."""
        self.store = store
        self.queues = queues
        self.settings = settings
        self.config = config if config is not None else AssistantConfig.from_settings(settings)
        self.now = now
        self._classifier = classifier
        self._lock = threading.Lock()
        self.policy = HoldPolicy(self.config.hold_max_seconds)
        self.classify_live: TaskWrapper = queues[LIVE].task(name="assistant_classify")(
            self.run_classify
        )
        self.classify_backlog: TaskWrapper = queues[BACKLOG].task(name="assistant_classify")(
            self.run_backlog
        )
        self.release_held: TaskWrapper = queues[QUEUE].task(name="release_held")(self.run_release)
        self.sweep_held: TaskWrapper = queues[QUEUE].task(name="sweep_held")(self.run_sweep)

    @property
    def classifier(self) -> Classifier:
        """The configured model adapter, made on first use (a model may take a second to load)."""
        with self._lock:
            if self._classifier is None:
                made = make_classifier(self.settings, self.store, self.config)
                if made is None:
                    raise RuntimeError("the assistant is off")
                self._classifier = made
            return self._classifier

    # -- installing --------------------------------------------------------

    def install(self) -> AssistantJobs:
        """Let the pipeline hold mail: from now on this process has the releasers."""
        ACTIVE.append(self.policy)
        return self

    def uninstall(self) -> None:
        """Stop holding mail in this process; close the model."""
        if self.policy in ACTIVE:
            ACTIVE.remove(self.policy)
        with self._lock:
            classifier, self._classifier = self._classifier, None
        if classifier is not None:
            classifier.close()

    # -- the ingest step ---------------------------------------------------

    def after_batch(self, result: BatchResult) -> list[int]:
        """Enqueue a question per held message and one delayed release; the held ids."""
        if not result.created_ids:
            return []
        with self.store.session() as session:
            held = still_held(session, result.created_ids)
        for message_id in held:
            self.classify_live([message_id])
        if held:
            self.release_held.schedule((held,), delay=self.config.hold_max_seconds)
        return held

    # -- tasks -------------------------------------------------------------

    def run_classify(self, message_ids: list[int]) -> None:
        """Ask the model about these messages (once each) and apply the verdicts."""
        classify_messages(self.store, self.classifier, message_ids, self.now)

    def run_backlog(self, message_ids: list[int]) -> None:
        """Catch-up: like :meth:`run_classify`, yielding to live mail before each call."""
        live = self.queues[LIVE]
        outcome = classify_messages(
            self.store,
            self.classifier,
            message_ids,
            self.now,
            should_yield=lambda: live.pending_count() > 0,
        )
        if outcome.left:
            self.classify_backlog.schedule((outcome.left,), delay=YIELD_DELAY)

    def run_release(self, message_ids: list[int]) -> list[int]:
        """The delayed release: end the hold of those still held."""
        with self.store.session() as session:
            return release(session, message_ids, self.now())

    def run_sweep(self) -> list[int]:
        """The safety sweep: release everything held longer than ``hold_max_seconds``."""
        with self.store.session() as session:
            due = overdue(session, self.now(), self.config.hold_max_seconds)
            return release(session, due, self.now()) if due else []

    # -- duties ------------------------------------------------------------

    def sweep(self) -> None:
        """The once-a-minute duty: enqueue a sweep."""
        self.sweep_held()

    def catch_up_duty(self) -> None:
        """The 15-minute duty (see :meth:`catch_up`)."""
        self.catch_up()

    def catch_up(self) -> dict[int, list[int]]:
        """The 15-minute duty: queue never-asked mail, only while ``enrich_backlog`` is empty."""
        if self.queues[BACKLOG].pending_count() > 0:
            return {}
        with self.store.session() as session:
            batches = catchup.catch_up_batches(session)
        for ids in batches.values():
            self.classify_backlog(ids)
        return batches


class AssistantStep:
    """The ingest step that hands held mail to the assistant (enqueues, never works)."""

    name = "assistant"

    def __init__(self, jobs: AssistantJobs) -> None:
        self.jobs = jobs

    def run(self, result: BatchResult) -> None:
        """Enqueue the questions and the delayed release of the batch's held mail."""
        self.jobs.after_batch(result)
