"""Running the engine: consumers, the supervisor and periodic duties in one process or many.

Embedded (``mailroom serve`` on SQLite): every queue has a consumer thread in
the server process, next to the supervisor. At scale (PostgreSQL + Redis):
``mailroom worker --queues ...`` and ``mailroom supervisor`` run the same
code in separate processes on as many machines as wanted.

Shutdown (SIGTERM/SIGINT) is graceful: consumers finish the job in hand
(queued jobs stay in the durable queue), watchers stop, leases are released.

Propagation is enqueued after each commit that wrote pending changes (the
runtime registers ``Jobs.request_propagation`` in ``labels.propagation.WAKERS``),
and its consumer polls the queue every ``PROPAGATE_POLL`` seconds at most, so an
action reaches the provider within about a second; the "retry propagation" duty
every 60 s is only the safety net (retries after a backoff, a lost enqueue).
Sending works the same way: ``SendJobs.request`` is registered in
``outbound.hooks.WAKERS``, and the "send due mail" duty every 30 s enqueues the
lanes with due work (a lost job, a submission left mid-hand-off).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis
from huey import Huey
from huey.consumer import Consumer
from sqlalchemy import select

from mailroom.assistant.catchup import INTERVAL as CATCH_UP_INTERVAL
from mailroom.assistant.config import AssistantConfig
from mailroom.config import Settings
from mailroom.events.extract import extract_events
from mailroom.ingest import steps
from mailroom.jobs.assistant import SWEEP_INTERVAL, AssistantJobs, AssistantStep
from mailroom.jobs.key_rotation import INTERVAL as KEY_ROTATION_INTERVAL
from mailroom.jobs.key_rotation import KeyRotationJobs
from mailroom.jobs.leases import Leases, LocalLeases, RedisLeases
from mailroom.jobs.queues import QUEUES, make_queues
from mailroom.jobs.supervisor import Supervisor, SupervisorConfig
from mailroom.jobs.tasks import ENRICHERS, FollowUpStep, Jobs
from mailroom.jobs.webhooks import INTERVAL as WEBHOOK_INTERVAL
from mailroom.jobs.webhooks import WebhookJobs
from mailroom.labels import propagation
from mailroom.outbound import hooks as outbound_hooks
from mailroom.outbound.after_mail import AfterMail
from mailroom.providers import registry
from mailroom.providers.base import Watcher
from mailroom.store.engine import Store
from mailroom.store.models import Account

log = logging.getLogger(__name__)

# Longest wait of an idle propagate consumer before it looks at its queue again.
PROPAGATE_POLL = 0.1
# Queues polled that often too: a held message waits for its verdict's job and its release.
FAST_POLL = ("propagate", "enrich_live", "release")


class ThreadConsumer(Consumer):  # type: ignore[misc]
    """A huey consumer that can run beside other code (signals belong to the process)."""

    def _set_signal_handlers(self) -> None:
        """Signals are handled once by the process, not by each consumer."""


@dataclass
class Duty:
    """Something the supervisor process enqueues every ``interval`` seconds."""

    name: str
    interval: float
    action: Callable[[], None]
    next_at: float = 0.0


@dataclass
class Duties:
    """Periodic duties (idempotent, so several supervisor processes are harmless)."""

    duties: list[Duty] = field(default_factory=list)

    def tick(self, now: float) -> None:
        """Run every duty whose time has come."""
        for duty in self.duties:
            if now >= duty.next_at:
                duty.next_at = now + duty.interval
                try:
                    duty.action()
                except Exception:
                    log.exception("Periodic duty %s failed; will retry.", duty.name)


class Runtime:
    """The queues, tasks, supervisor and duties of one process."""

    def __init__(
        self,
        store: Store,
        settings: Settings,
        poll_interval: float = 300.0,
        propagation_sweep: float = 60.0,
    ) -> None:
        self.store = store
        self.settings = settings
        # A bad setting is refused before anything starts.
        assistant_config = AssistantConfig.from_settings(settings)
        self.queues: dict[str, Huey] = make_queues(settings)
        self.leases: Leases = (
            RedisLeases(
                redis.Redis.from_url(settings.redis_url), prefix=f"{settings.namespace}:lease:"
            )
            if settings.redis_url
            else LocalLeases(time.monotonic)
        )
        self.jobs = Jobs(store, self.queues, settings, leases=self.leases)
        if not any(isinstance(step, FollowUpStep) for step in steps.STEPS):
            steps.STEPS.append(FollowUpStep(self.jobs))
        if extract_events not in ENRICHERS:  # events in mail (mailroom.events)
            ENRICHERS.append(extract_events)
        self._waker = self.jobs.request_propagation
        propagation.WAKERS.append(self._waker)
        self._send_waker = self.jobs.sending.request
        outbound_hooks.WAKERS.append(self._send_waker)
        # Filing sent mail, bounces and the vacation response (outbound.after_mail).
        self.after_mail = AfterMail(settings, clock=self.jobs.now).install()
        self.webhooks = WebhookJobs(store, self.queues, settings, self.jobs.now)
        # Owner key rotations re-encrypt in the background (mailroom.jobs.key_rotation).
        self.key_rotations = KeyRotationJobs(store, self.queues, self.leases, self.jobs.now)
        # The assistant (SPEC §9), when the operator configured a model: holding new
        # mail, its questions and releasers (mailroom.jobs.assistant).
        self.assistant: AssistantJobs | None = None
        if assistant_config.enabled:
            self.assistant = AssistantJobs(
                store, self.queues, settings, self.jobs.now, config=assistant_config
            ).install()
            steps.STEPS.append(AssistantStep(self.assistant))
        self.supervisor = Supervisor(
            store,
            watcher_for=self._watcher_for,
            poll=lambda account_id: self.jobs.sync_account(account_id),
            leases=self.leases,
            config=SupervisorConfig(
                poll_interval=poll_interval, lease_ttl=settings.watch_lease_ttl
            ),
        )
        self.duties = Duties(
            [
                Duty("wake snoozed threads", 60, lambda: self.jobs.wake_snoozed()),
                Duty("retry propagation", propagation_sweep, self._propagate_due),
                Duty("prune the change and audit logs", 3600, lambda: self.jobs.prune_changelog()),
                Duty("prune expired uploads", 3600, lambda: self.jobs.prune_uploads()),
                Duty("prune ended sign-ins", 3600, lambda: self.jobs.prune_sign_ins()),
                Duty("send due mail", 30, self.jobs.sending.sweep),
                Duty("deliver webhooks", WEBHOOK_INTERVAL, self.webhooks.request),
                Duty("continue key rotations", KEY_ROTATION_INTERVAL, self.key_rotations.duty),
            ]
        )
        if self.assistant is not None:
            self.duties.duties += [
                Duty("release held mail", SWEEP_INTERVAL, self.assistant.sweep),
                Duty("assistant catch-up", CATCH_UP_INTERVAL, self.assistant.catch_up_duty),
            ]
        self._consumers: list[ThreadConsumer] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def _watcher_for(self, account_id: int) -> Watcher | None:
        with self.store.session() as session:
            provider = session.scalar(select(Account.provider).where(Account.id == account_id))
        if provider is None:
            return None
        return registry.watcher_for(self.store, provider, account_id, self.settings)

    def _propagate_due(self) -> None:
        # Enqueued directly, not through the coalescing marker: this also heals a lost job.
        for account_id in self.jobs.accounts_with_due_changes():
            self.jobs.propagate(account_id)

    def start_consumers(self, names: tuple[str, ...] = QUEUES, workers: int = 1) -> None:
        """Start a consumer (worker threads) for each named queue."""
        for name in names:
            consumer = ThreadConsumer(
                self.queues[name],
                workers=workers,
                worker_type="thread",
                periodic=False,
                initial_delay=0.05,
                max_delay=PROPAGATE_POLL if name in FAST_POLL else 1.0,
                backoff=1.5,
                check_worker_health=False,
            )
            consumer.start()
            self._consumers.append(consumer)
            log.info("Consuming queue %s with %s worker thread(s).", name, workers)

    def start_supervisor(self, clock: Callable[[], float] = time.monotonic) -> None:
        """Start the supervisor and the periodic duties in a background thread."""
        from mailroom.metrics import catalogue

        catalogue.watches_from(lambda: len(self.supervisor.watching()))

        def loop() -> None:
            try:
                while not self._stop.is_set():
                    now = clock()
                    try:
                        self.supervisor.tick(now)
                        self.duties.tick(now)
                    except Exception:
                        log.exception("Supervisor tick failed; continuing.")
                    self._stop.wait(1.0)
            finally:
                self.supervisor.stop()

        thread = threading.Thread(target=loop, name="supervisor", daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        """Graceful shutdown: finish jobs in hand, stop watchers, release leases."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=60)
        for consumer in self._consumers:
            consumer.stop(graceful=True)
        self._consumers.clear()
        steps.STEPS[:] = [
            s for s in steps.STEPS if not isinstance(s, (FollowUpStep, AssistantStep))
        ]
        if self.assistant is not None:
            self.assistant.uninstall()
        if extract_events in ENRICHERS:
            ENRICHERS.remove(extract_events)
        if self._waker in propagation.WAKERS:
            propagation.WAKERS.remove(self._waker)
        if self._send_waker in outbound_hooks.WAKERS:
            outbound_hooks.WAKERS.remove(self._send_waker)
        self.jobs.sending.close()
        self.webhooks.close()
        self.after_mail.uninstall()

    def wait(self) -> None:
        """Block until ``stop`` is called (from a signal handler)."""
        while not self._stop.is_set():
            self._stop.wait(1.0)
