"""The propagate job: enqueued after a commit, coalesced, one at a time per account."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.jobs.queues import make_queues
from mailroom.jobs.tasks import Jobs
from mailroom.labels import propagation
from mailroom.labels.operations import Operations
from mailroom.labels.resolver import ensure_system_labels
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.providers import registry
from mailroom.providers.base import MessageChanges, Outcome
from mailroom.store.engine import Store
from mailroom.store.models import PendingChange
from tests.factories import make_message
from tests.helpers import drain, ingest


class Recorder:
    """A propagator that marks everything done and remembers each batch's message ids."""

    batches: list[list[int | None]] = []
    during: list[object] = []  # callables run inside the first call (a concurrent action)

    def __init__(self, store: Store, settings: Settings | None = None) -> None:
        self.store = store

    def propagate(self, account_id: int, batch: Sequence[MessageChanges]) -> Iterator[Outcome]:
        self.batches.append([changes.message_id for changes in batch])
        while self.during:
            action = self.during.pop(0)
            assert callable(action)
            action()
        for changes in batch:
            yield Outcome.done(changes)


@pytest.fixture
def recorded() -> Iterator[None]:
    """Register the recording propagator as provider "recorded" for one test."""
    Recorder.batches, Recorder.during = [], []
    registry.register(registry.ProviderEntry("recorded", propagator=Recorder))
    yield
    registry.unregister("recorded")


@pytest.fixture
def jobs(store: Store, tmp_path: Path) -> Iterator[Jobs]:
    """Jobs on SQLite queues, registered as the after-commit waker like the runtime does."""
    jobs = Jobs(store, make_queues(Settings(data_dir=tmp_path)))
    propagation.WAKERS.append(jobs.request_propagation)
    yield jobs
    propagation.WAKERS.remove(jobs.request_propagation)


def _account(store: Store, name: str) -> tuple[int, int, list[int]]:
    """An account of provider "recorded" with two inbox messages: (user, account, messages)."""
    with store.session() as session:
        user = get_or_create_user(session)
        account = get_or_create_account(session, user, name, "recorded").id
        inbox = ensure_system_labels(session, user.id)["inbox"]
        user_id = user.id
    result = ingest(
        store,
        (user_id, account, inbox),
        [(f"{name}{i}", make_message(f"{name}{i}@x")) for i in range(2)],
    )
    return user_id, account, sorted(result.created_ids)


def _states(store: Store) -> list[str]:
    with store.session() as session:
        return list(session.scalars(select(PendingChange.state).order_by(PendingChange.id)))


def test_an_action_enqueues_one_job_per_account_and_repeats_coalesce(
    store: Store, jobs: Jobs, recorded: None
) -> None:
    """A commit enqueues propagate once per account; while it waits, more actions add no job."""
    user, a, (m1, m2) = _account(store, "a")
    _user, b, (n1, _n2) = _account(store, "b")
    queue = jobs.queues["propagate"]
    with store.session() as session:
        ops = Operations(session, user)
        ops.star([m1])
        ops.star([n1])
    assert queue.pending_count() == 2
    with store.session() as session:
        Operations(session, user).archive([m2])  # account a's job is still queued
    assert queue.pending_count() == 2
    assert drain(queue) == 2
    assert sorted(map(sorted, Recorder.batches)) == [[m1, m2], [n1]]
    assert set(_states(store)) == {"done"}
    with store.session() as session:
        Operations(session, user).star([m1], starred=False)  # the job started: ask anew
    assert queue.pending_count() == 1
    assert a != b


def test_a_second_job_returns_while_one_runs_and_the_first_looks_again(
    store: Store, jobs: Jobs, recorded: None
) -> None:
    """A job started during a run does nothing; the running one then carries what came meanwhile."""
    user, account, (m1, m2) = _account(store, "a")
    with store.session() as session:
        Operations(session, user).star([m1])

    def concurrent_action() -> None:
        with store.session() as session:
            Operations(session, user).star([m2])
        jobs.run_propagate(account)  # the job that commit enqueued, started at once

    Recorder.during.append(concurrent_action)
    jobs.run_propagate(account)
    assert Recorder.batches == [[m1], [m2]]  # the second job ran nothing; the first looked again
    assert _states(store) == ["done", "done"]


def test_the_sweep_finds_only_accounts_with_due_changes(
    store: Store, jobs: Jobs, recorded: None
) -> None:
    """The safety net lists the accounts with due pending changes, and none once they are done."""
    user, account, (m1, _m2) = _account(store, "a")
    _account(store, "b")
    with store.session() as session:
        Operations(session, user).star([m1])
    assert jobs.accounts_with_due_changes() == [account]
    drain(jobs.queues["propagate"])
    assert jobs.accounts_with_due_changes() == []
