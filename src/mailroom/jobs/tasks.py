"""Tasks: thin wrappers that load ids, call a service, and enqueue what follows.

All logic lives in services (providers, labels, ingest); a task only decides
what to enqueue next. Tasks must be idempotent: huey delivers at least once,
and several workers may run the same kind of job.

Import chain: ``import_page`` imports one page and, while history is left,
enqueues the next page at the back of ``ingest_backlog`` — so pages of
several accounts interleave and every account gets a usable inbox before
any gets its archive. Each page stamps a heartbeat; every ordinary sync ends
by restarting an import that has work and has been silent for 5 minutes.

Propagation: a commit that wrote pending changes asks for ``propagate`` of its
accounts at once (``request_propagation``, the after-commit waker of
``labels.propagation``); the runtime's 60 s sweep is only the safety net.
Asking is cheap and coalesces: while a job for the account is queued and not
started (a marker in the queue's storage) no second one is enqueued; while one
runs (a lease per account) another returns at once, and the running one looks
for due changes again after letting go of the lease, so nothing committed
meanwhile waits for the sweep.

Sending: ``send_lane`` on the lane queues ``send_urgent``, ``send_calm`` and
``send_direct`` (:mod:`mailroom.jobs.sending`, reached as ``Jobs.sending``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from huey import Huey
from huey.api import TaskWrapper
from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.config import Settings
from mailroom.errors import ConfigError, ProviderError
from mailroom.ingest.model import BatchResult
from mailroom.ingest.routing import BACKLOG, LIVE, RECENT_QUEUE, queue_for
from mailroom.jobs.leases import Leases, LocalLeases
from mailroom.jobs.sending import SendJobs
from mailroom.jobs.status import clear_failure, record_failure
from mailroom.labels.operations import Operations
from mailroom.labels.propagation import has_due, propagate_pending
from mailroom.metrics import catalogue
from mailroom.providers import registry
from mailroom.providers.base import AuthError
from mailroom.providers.errors import account_outcome
from mailroom.providers.local.propagator import LocalPropagator
from mailroom.store.engine import Store
from mailroom.store.models import Account, Message, PendingChange, SyncState, User, utcnow

log = logging.getLogger(__name__)

STALLED_AFTER = timedelta(minutes=5)
RETRIES = 3  # transient failures of one sync or import page retried in a row
RETRY_DELAY = 30  # seconds
HEARTBEAT = "import_heartbeat"
# One propagation per account at a time; the lease outlives any sane run (it is not renewed).
PROPAGATE_LEASE_SECONDS = 900.0

# Follow-up work per message batch (search indexing happens at insert);
# extensions such as the assistant's classifier append here.
Enricher = Callable[[Store, Sequence[int]], None]
ENRICHERS: list[Enricher] = []


class Jobs:
    """The task functions of mailroom, registered on the queues of one process."""

    def __init__(
        self,
        store: Store,
        queues: dict[str, Huey],
        settings: Settings | None = None,
        now: Callable[[], datetime] = utcnow,
        leases: Leases | None = None,
    ) -> None:
        self.store = store
        self.queues = queues
        self.settings = settings
        self.now = now
        self.leases: Leases = leases or LocalLeases(time.monotonic)
        self.sync_account: TaskWrapper = queues["ingest"].task(
            name="sync_account", retries=3, retry_delay=30
        )(self.run_sync)
        self.import_page: TaskWrapper = queues["ingest_backlog"].task(
            name="import_page", retries=5, retry_delay=30
        )(self.run_import_page)
        self.propagate: TaskWrapper = queues["propagate"].task(
            name="propagate", retries=3, retry_delay=30
        )(self.run_propagate)
        self.wake_snoozed: TaskWrapper = queues["ingest"].task(name="wake_snoozed")(
            self.run_wake_snoozed
        )
        self.prune_changelog: TaskWrapper = queues["ingest"].task(name="prune_changelog")(
            self.run_prune_changelog
        )
        self.prune_uploads: TaskWrapper = queues["ingest"].task(name="prune_uploads")(
            self.run_prune_uploads
        )
        self.prune_sign_ins: TaskWrapper = queues["ingest"].task(name="prune_sign_ins")(
            self.run_prune_sign_ins
        )
        self.sending = SendJobs(store, queues, settings, now)
        self.follow_up: dict[str, TaskWrapper] = {
            name: queues[name].task(name="follow_up", retries=2, retry_delay=60)(self.run_follow_up)
            for name in (LIVE, RECENT_QUEUE, BACKLOG)
        }

    # -- helpers -------------------------------------------------------------

    def _account(self, session: Session, account_id: int) -> Account | None:
        account = session.get(Account, account_id)
        if account is None or account.status != "active":
            return None
        return account

    @staticmethod
    def _watch_reset(error: BaseException) -> dict[str, str]:
        # An account that needs its owner is not being watched either.
        return {"watch_state": "idle"} if account_outcome(error).status else {}

    def _failed(
        self, job: TaskWrapper, account_id: int, attempt: int, error: ProviderError | ConfigError
    ) -> None:
        """Handle a failed sync or import page as :func:`account_outcome` says.

        Recorded on the account when it says so (logged once, never raised). A
        provider-set pace (rate limit: ``retry_after`` > 0) re-enqueues the job
        without spending an attempt; another retryable failure spends one, up to
        ``RETRIES``, then the job rests until the supervisor's next poll.
        """
        outcome = account_outcome(error)
        if outcome.recorded:
            record_failure(self.store, account_id, error, **self._watch_reset(error))
        if not outcome.retry:
            return
        if outcome.retry_after:
            job.schedule((account_id,), delay=outcome.retry_after)
        elif attempt < RETRIES:
            delay = RETRY_DELAY if outcome.retry_after is None else outcome.retry_after
            job.schedule((account_id, attempt + 1), delay=delay)

    def _heartbeat(self, session: Session, account_id: int) -> None:
        state = session.get(SyncState, (account_id, HEARTBEAT))
        stamp = self.now().isoformat()
        if state is None:
            session.add(SyncState(account_id=account_id, key=HEARTBEAT, value=stamp))
        else:
            state.value = stamp

    # -- sync and import -----------------------------------------------------

    def run_sync(self, account_id: int, attempt: int = 0) -> None:
        """Sync new mail of one account, then restart its import if it stalled.

        A failure that needs a person (credentials, host, master key) is recorded on
        the account and logged once, never raised: a traceback per poll says nothing
        the reason does not. A transient one is retried ``RETRIES`` times, then left
        to the supervisor's next poll.
        """
        with self.store.session() as session:
            account = self._account(session, account_id)
            provider = account.provider if account else None
        syncer = registry.syncer_for(self.store, provider, self.settings) if provider else None
        if syncer is None:
            return
        try:
            syncer.sync(account_id)
        except (ProviderError, ConfigError) as error:
            self._failed(self.sync_account, account_id, attempt, error)
            return
        clear_failure(self.store, account_id)
        self.restart_stalled_import(account_id)

    def run_import_page(self, account_id: int, attempt: int = 0) -> None:
        """Import one page of history; enqueue the next while work is left.

        Failures as in :meth:`run_sync`; after ``RETRIES`` transient failures the
        chain rests until the stalled-import restart of a later sync.
        """
        with self.store.session() as session:
            account = self._account(session, account_id)
            provider = account.provider if account else None
            if account is not None:
                self._heartbeat(session, account_id)
        importer = registry.importer_for(self.store, provider, self.settings) if provider else None
        if importer is None:
            return
        try:
            more = importer.import_page(account_id)
        except (ProviderError, ConfigError) as error:
            self._failed(self.import_page, account_id, attempt, error)
            return
        finally:
            importer.close()  # one job, one page: nothing is held until the next job
        if more:
            self.import_page(account_id)

    def restart_stalled_import(self, account_id: int) -> bool:
        """Enqueue the next import page when the import has work but was silent 5 minutes."""
        with self.store.session() as session:
            account = self._account(session, account_id)
            importer = (
                registry.importer_for(self.store, account.provider, self.settings)
                if account
                else None
            )
            if importer is None or not importer.state(account_id).importing:
                return False
            beat = session.get(SyncState, (account_id, HEARTBEAT))
            last = datetime.fromisoformat(beat.value) if beat and beat.value else None
            if last is not None and self.now() - last < STALLED_AFTER:
                return False
            self._heartbeat(session, account_id)
        log.info("Import of account %s was silent; restarting it.", account_id)
        self.import_page(account_id)
        return True

    # -- propagation, snooze, follow-up --------------------------------------

    def request_propagation(self, account_ids: Iterable[int]) -> None:
        """Enqueue propagation of these accounts, unless a job is already queued and not started.

        The after-commit waker of :mod:`mailroom.labels.propagation`; never raises
        for one account's sake (the sweep is the safety net).
        """
        queue = self.queues["propagate"]
        for account_id in sorted(set(account_ids)):
            try:
                if queue.put_if_empty(_queued_marker(account_id), 1):
                    self.propagate(account_id)
            except Exception:  # the commit stands; the sweep enqueues it instead
                log.exception("Could not enqueue the propagation of account %s", account_id)

    def run_propagate(self, account_id: int) -> None:
        """Carry the account's pending changes to its provider (coalesced, see the module)."""
        queue = self.queues["propagate"]
        queue.delete(_queued_marker(account_id))  # from now on a request enqueues anew
        key = f"propagate:{account_id}"
        while True:
            token = self.leases.acquire(key, PROPAGATE_LEASE_SECONDS)
            if token is None:
                return  # one is running; it looks again after it lets go
            try:
                settled = self._propagate(account_id)
            finally:
                self.leases.release(key, token)
            if not settled or not has_due(self.store, account_id, self.now()):
                return

    def _propagate(self, account_id: int) -> bool:
        """One consumer run; whether it settled everything it took (so looking again helps)."""
        with self.store.session() as session:
            account = session.get(Account, account_id)
            if account is None:
                return False
            propagator = registry.propagator_for(self.store, account.provider, self.settings)
        try:
            run = propagate_pending(
                self.store, account_id, propagator or LocalPropagator(self.store), self.now()
            )
        except (AuthError, ConfigError) as error:  # the changes wait; the sweep tries again
            record_failure(self.store, account_id, error, **self._watch_reset(error))
            return False
        return run.lost == 0

    def accounts_with_due_changes(self) -> list[int]:
        """Accounts that have pending changes due now."""
        with self.store.session() as session:
            return list(
                session.scalars(
                    select(PendingChange.account_id)
                    .where(
                        PendingChange.state == "pending",
                        PendingChange.next_attempt_at <= self.now(),
                    )
                    .distinct()
                )
            )

    def run_wake_snoozed(self) -> int:
        """Wake every snoozed thread whose time has come; returns how many."""
        woken = 0
        with self.store.session() as session:
            users = list(session.scalars(select(User.id)))
        for user_id in users:
            with self.store.session() as session:
                woken += len(Operations(session, user_id, now=self.now).wake_due())
        return woken

    def run_prune_changelog(self) -> int:
        """Drop change-log rows older than the retention (JMAP clients then resync), and
        audit-log rows older than theirs; how many change rows."""
        from mailroom.jmap.changes import prune_changes

        days = self.settings.changelog_retention_days if self.settings else 30
        pruned = prune_changes(self.store, self.now() - timedelta(days=days))
        self.run_prune_audit_log()
        return pruned

    def run_prune_audit_log(self) -> int:
        """Delete audit-log rows older than MAILROOM_AUDIT_RETENTION_DAYS (0: none); how many."""
        from mailroom.audit.retention import audit_cutoff, prune_audit_log

        days = self.settings.audit_retention_days if self.settings else 365
        cutoff = audit_cutoff(self.now(), days)
        if cutoff is None:
            return 0
        with self.store.session() as session:
            return prune_audit_log(session, cutoff)

    def run_prune_uploads(self) -> int:
        """Delete expired JMAP uploads and the bytes nothing uses any more; how many uploads."""
        from mailroom.jmap.uploads import prune_uploads

        return prune_uploads(self.store, self.now())

    def run_prune_sign_ins(self) -> int:
        """Delete ended web sessions and sign-in failures past the lock-out window; how many."""
        from mailroom.jmap.auth import LockoutPolicy, SignInLimiter, lockout_policy
        from mailroom.web.sessions import prune_sessions

        policy = lockout_policy(self.settings) if self.settings else LockoutPolicy()
        failures = SignInLimiter(self.store, policy, clock=self.now).prune()
        return prune_sessions(self.store, self.now()) + failures

    def run_follow_up(self, message_ids: list[int]) -> None:
        """Run the registered enrichers on a batch of messages."""
        for enricher in ENRICHERS:
            try:
                enricher(self.store, message_ids)
            except Exception:
                log.exception("Enricher %s failed", getattr(enricher, "__name__", enricher))

    def enqueue_follow_up(self, result: BatchResult) -> dict[str, list[int]]:
        """Route a stored batch's new messages to the follow-up queues (the ingest step)."""
        if not result.created_ids:
            return {}
        with self.store.session() as session:
            finished = session.scalar(
                select(Account.import_finished_at).where(Account.id == result.account_id)
            )
            rows = session.execute(
                select(Message.id, Message.received_at).where(Message.id.in_(result.created_ids))
            ).all()
        routed: dict[str, list[int]] = {}
        now = self.now()
        if finished is not None:  # new mail of a synced account, not its history
            catalogue.sync_lag((now - received).total_seconds() for _, received in rows)
        for message_id, received_at in rows:
            routed.setdefault(queue_for(finished is not None, received_at, now), []).append(
                message_id
            )
        for queue, ids in routed.items():
            self.follow_up[queue](sorted(ids))
        return routed


class FollowUpStep:
    """The ingest step that routes new mail to the follow-up queues."""

    name = "follow_up"

    def __init__(self, jobs: Jobs) -> None:
        self.jobs = jobs

    def run(self, result: BatchResult) -> None:
        """Enqueue, never work."""
        self.jobs.enqueue_follow_up(result)


def _queued_marker(account_id: int) -> str:
    """The queue-storage key saying "a propagate job for this account waits to start"."""
    return f"propagate-queued:{account_id}"


def pending_counts(queues: dict[str, Huey]) -> dict[str, Any]:
    """How many jobs wait in each queue (for status output)."""
    return {name: queue.pending_count() for name, queue in queues.items()}
