"""Carrying operations to providers: the one consumer of pending changes.

State machine of a ``pending_changes`` row::

    pending --outcome done--> done
    pending --outcome retry--> pending (attempts + 1, next_attempt_at = now + backoff)
    pending --outcome retry, attempts >= MAX_ATTEMPTS--> failed
    pending --outcome lost (connection gone), or no outcome--> pending (nothing charged)

:func:`propagate_pending` is the only code that picks due changes and moves
rows along those arrows: it reads the account's due rows (oldest first, at
most ``BATCH``), groups them per message into plain values
(:class:`~mailroom.providers.base.MessageChanges`), hands the batch to the
provider's :class:`~mailroom.providers.base.Propagator` and commits each
outcome as it is reported, until nothing is due or a run makes no progress.

Propagators must be idempotent (replaying a change alters nothing at the
provider): they derive the provider state from the message's *current*
labels and flags, not from the delta in the payload. Until a row is
``done``, a sync that reads the older provider state must not revert the
local change — ``pending_message_ids`` tells it which messages to leave
alone.

Waking the consumer: the operations service calls :func:`wake_after_commit`
when it writes pending changes; once the session's transaction *commits*
(never on rollback, never inside the transaction), every function in
``WAKERS`` is called once with the accounts touched by that transaction (the
job runtime registers its enqueuer there, as ``ingest.steps`` gets the
follow-up step). The periodic sweep of the runtime is only the safety net.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import event, select, update
from sqlalchemy.orm import Session, SessionTransaction

from mailroom.errors import ConfigError
from mailroom.providers.base import (
    AuthError,
    MessageChanges,
    Outcome,
    PendingEntry,
    Propagator,
    TransientError,
)
from mailroom.store.engine import Store
from mailroom.store.models import PendingChange, utcnow

__all__ = [
    "BATCH",
    "MAX_ATTEMPTS",
    "WAKERS",
    "PropagationRun",
    "backoff",
    "due_batch",
    "has_due",
    "pending_message_ids",
    "propagate_pending",
    "recent_label",
    "wake_after_commit",
]

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 8
BATCH = 500  # pending changes per call of a propagator

# Called after a commit that wrote pending changes, with the accounts touched.
Waker = Callable[[Sequence[int]], None]
WAKERS: list[Waker] = []
_TOUCHED = "mailroom.pending_change_accounts"


@dataclass
class PropagationRun:
    """What one consumer run did, counted in pending changes."""

    done: int = 0
    retried: int = 0
    failed: int = 0
    lost: int = 0


def pending_message_ids(session: Session, message_ids: Iterable[int]) -> set[int]:
    """Those of ``message_ids`` with a change the provider has not acknowledged yet."""
    ids = list(message_ids)
    if not ids:
        return set()
    rows = session.scalars(
        select(PendingChange.message_id)
        .where(PendingChange.message_id.in_(ids), PendingChange.state == "pending")
        .distinct()
    )
    return {mid for mid in rows if mid is not None}


def recent_label(session: Session, message_id: int, candidates: set[int]) -> int:
    """The candidate label added to the message most recently (by its change history)."""
    for (payload,) in session.execute(
        select(PendingChange.payload)
        .where(PendingChange.message_id == message_id)
        .order_by(PendingChange.id.desc())
    ):
        added = [int(x) for x in (payload or {}).get("add", []) if int(x) in candidates]
        if added:
            return added[-1]
    return max(candidates)


def backoff(attempts: int) -> timedelta:
    """Delay before the next try: 30 s doubling, at most one hour."""
    return timedelta(seconds=min(30 * 2 ** max(attempts - 1, 0), 3600))


def _due(account_id: int, moment: datetime) -> Any:
    return select(PendingChange).where(
        PendingChange.account_id == account_id,
        PendingChange.state == "pending",
        PendingChange.next_attempt_at <= moment,
    )


def has_due(store: Store, account_id: int, now: datetime | None = None) -> bool:
    """Whether the account has pending changes due now."""
    with store.session() as session:
        statement = _due(account_id, now or utcnow()).with_only_columns(PendingChange.id)
        return session.scalar(statement.limit(1)) is not None


def due_batch(
    session: Session, account_id: int, moment: datetime, limit: int = BATCH
) -> list[MessageChanges]:
    """The account's due pending changes, oldest first, grouped per message.

    A message deleted forever has lost its id (``SET NULL``): its changes are
    grouped by provider id instead.
    """
    groups: dict[tuple[str, int | str], list[PendingChange]] = {}
    for row in session.scalars(_due(account_id, moment).order_by(PendingChange.id).limit(limit)):
        key: tuple[str, int | str] = (
            ("message", row.message_id) if row.message_id is not None else ("gone", row.provider_id)
        )
        groups.setdefault(key, []).append(row)
    return [
        MessageChanges(
            message_id=rows[0].message_id,
            provider_id=rows[0].provider_id,
            entries=tuple(
                PendingEntry(r.id, r.operation, dict(r.payload or {}), r.attempts) for r in rows
            ),
        )
        for rows in groups.values()
    ]


def propagate_pending(
    store: Store,
    account_id: int,
    propagator: Propagator,
    now: datetime | None = None,
    *,
    limit: int = BATCH,
) -> PropagationRun:
    """Carry every due pending change of one account, a batch at a time (module docstring).

    Raises what ends a run without charging anyone (``AuthError``,
    ``TransientError``, ``ConfigError``) after committing what was settled.
    """
    moment = now or utcnow()
    run = PropagationRun()
    while True:
        with store.session() as session:
            batch = due_batch(session, account_id, moment, limit)
        if not batch:
            return run
        before = (run.done, run.retried, run.failed)
        open_ids = {entry_id for changes in batch for entry_id in changes.ids}
        outcomes = propagator.propagate(account_id, batch)
        try:
            for outcome in outcomes:
                _settle(store, outcome, open_ids, moment, run)
        except (AuthError, TransientError, ConfigError):
            run.lost += len(open_ids)
            raise
        except Exception as exc:  # a provider bug: charge it, so it ends as "failed"
            log.exception("Propagation of account %s failed", account_id)
            _settle(store, Outcome.retry(open_ids, str(exc)), open_ids, moment, run)
        finally:
            close = getattr(outcomes, "close", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    close()  # leaves the propagator's connection block
        run.lost += len(open_ids)
        if open_ids or (run.done, run.retried, run.failed) == before:
            return run  # something is left for a later run
        if sum(len(changes.entries) for changes in batch) < limit:
            return run  # that was all that was due (the job looks again before it stops)


def _settle(
    store: Store, outcome: Outcome, open_ids: set[int], moment: datetime, run: PropagationRun
) -> None:
    """Commit one outcome for the changes of this batch it names (each settles once)."""
    ids = sorted(set(outcome.entry_ids) & open_ids)
    if not ids or outcome.status == "lost":
        return
    with store.session() as session:
        if outcome.status == "done":
            if outcome.record is not None:
                outcome.record(session)
            result = session.execute(
                update(PendingChange)
                .where(PendingChange.id.in_(ids), PendingChange.state == "pending")
                .values(state="done", done_at=utcnow(), last_error=None)
            )
            run.done += int(result.rowcount)  # type: ignore[attr-defined]
        else:
            for row in session.scalars(
                select(PendingChange).where(
                    PendingChange.id.in_(ids), PendingChange.state == "pending"
                )
            ):
                row.attempts += 1
                row.last_error = outcome.reason[:2000]
                if row.attempts >= MAX_ATTEMPTS:
                    row.state = "failed"
                    run.failed += 1
                else:
                    row.next_attempt_at = moment + backoff(row.attempts)
                    run.retried += 1
            log.warning("Propagating pending changes %s failed: %s", ids, outcome.reason)
    open_ids.difference_update(ids)


# -- waking the consumer after a commit ---------------------------------------


def wake_after_commit(session: Session, account_ids: Iterable[int]) -> None:
    """Have the propagation of these accounts enqueued once the session's transaction commits."""
    touched: set[int] = session.info.setdefault(_TOUCHED, set())
    touched.update(account_ids)


@event.listens_for(Session, "after_commit")
def _after_commit(session: Session) -> None:
    """The transaction committed: tell every waker, once, which accounts it touched."""
    if session.in_nested_transaction():
        return  # a savepoint was released: the transaction itself may still roll back
    touched: set[int] | None = session.info.pop(_TOUCHED, None)
    if not touched:
        return
    accounts = sorted(touched)
    for waker in list(WAKERS):
        try:
            waker(accounts)
        except Exception:  # the commit stands; the periodic sweep catches up
            log.exception("Waking the propagation of accounts %s failed", accounts)


@event.listens_for(Session, "after_transaction_end")
def _after_transaction_end(session: Session, transaction: SessionTransaction) -> None:
    """A top-level transaction that ended without a commit (rollback) wakes nobody."""
    if transaction.parent is None:
        session.info.pop(_TOUCHED, None)
