"""The one consumer of pending changes: grouping, attempts, backoff, failure, the wake-up hook."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, update

from mailroom.labels import propagation
from mailroom.labels.operations import Operations
from mailroom.labels.propagation import MAX_ATTEMPTS, backoff, propagate_pending
from mailroom.providers.base import MessageChanges, Outcome, TransientError
from mailroom.store.engine import Store
from mailroom.store.models import PendingChange
from tests.factories import make_message
from tests.helpers import ingest, make_account

NOW = datetime(2030, 1, 1, tzinfo=UTC)


class Scripted:
    """A propagator that records its batches and answers from a script per message."""

    def __init__(self, answer: str = "done", fail_after: int | None = None) -> None:
        self.answer = answer
        self.fail_after = fail_after  # raise TransientError after this many outcomes
        self.batches: list[list[MessageChanges]] = []

    def propagate(self, account_id: int, batch: Sequence[MessageChanges]) -> Iterator[Outcome]:
        self.batches.append(list(batch))
        for n, changes in enumerate(batch):
            if self.fail_after is not None and n >= self.fail_after:
                raise TransientError("The connection to the server was lost.")
            if self.answer == "done":
                yield Outcome.done(changes)
            elif self.answer == "retry":
                yield Outcome.retry(changes, "the server said NO")
            elif self.answer == "lost":
                yield Outcome.lost(changes, "connection gone")
            else:
                raise RuntimeError("a bug in the provider")


def _setup(store: Store) -> tuple[int, int, list[int]]:
    """A user with three messages; returns (user, account, message ids)."""
    account = make_account(store)
    result = ingest(store, account, [(f"m{i}", make_message(f"m{i}@x")) for i in range(3)])
    return account[0], account[1], sorted(result.created_ids)


def _rows(store: Store) -> list[PendingChange]:
    with store.session() as session:
        return list(session.scalars(select(PendingChange).order_by(PendingChange.id)))


def _age(store: Store) -> None:
    """Make every pending change due at NOW (they were written with the real clock)."""
    with store.session() as session:
        session.execute(update(PendingChange).values(next_attempt_at=NOW))


def test_changes_are_grouped_per_message_oldest_first(store: Store) -> None:
    """Two changes of one message arrive as one group, in order; every entry ends done."""
    user, account, (a, b, _c) = _setup(store)
    with store.session() as session:
        ops = Operations(session, user)
        ops.star([a])
        ops.archive([b])
        ops.mark_read([a])
    _age(store)
    propagator = Scripted()
    run = propagate_pending(store, account, propagator, NOW)
    assert run.done == 3 and run.retried == run.failed == run.lost == 0
    (batch,) = propagator.batches
    assert [g.message_id for g in batch] == [a, b]
    assert [e.operation for e in batch[0].entries] == ["star", "read"]
    assert batch[0].ids == tuple(sorted(batch[0].ids))
    assert {r.state for r in _rows(store)} == {"done"}


def test_a_refusal_costs_an_attempt_and_backs_off(store: Store) -> None:
    """A retry outcome charges one attempt and makes the change due only after the backoff."""
    user, account, (a, *_rest) = _setup(store)
    with store.session() as session:
        Operations(session, user).star([a])
    _age(store)
    run = propagate_pending(store, account, Scripted("retry"), NOW)
    assert run.retried == 1 and run.done == 0
    (row,) = _rows(store)
    assert row.state == "pending" and row.attempts == 1 and row.last_error == "the server said NO"
    assert row.next_attempt_at == NOW + backoff(1)
    early = Scripted()
    assert propagate_pending(store, account, early, NOW + timedelta(seconds=29)).done == 0
    assert early.batches == []  # nothing due: the provider is not even asked
    assert propagate_pending(store, account, Scripted(), NOW + backoff(1)).done == 1


def test_the_last_attempt_marks_the_change_failed(store: Store) -> None:
    """After MAX_ATTEMPTS refusals the change is failed and never offered again."""
    user, account, (a, *_rest) = _setup(store)
    with store.session() as session:
        Operations(session, user).star([a])
    _age(store)
    moment = NOW
    for _ in range(MAX_ATTEMPTS):
        propagate_pending(store, account, Scripted("retry"), moment)
        moment += timedelta(hours=2)
    (row,) = _rows(store)
    assert row.state == "failed" and row.attempts == MAX_ATTEMPTS
    later = Scripted()
    propagate_pending(store, account, later, moment)
    assert later.batches == []


def test_a_lost_connection_costs_no_attempt(store: Store) -> None:
    """Outcomes before the connection broke are kept; the rest stay due with no attempt charged."""
    user, account, (a, b, c) = _setup(store)
    with store.session() as session:
        ops = Operations(session, user)
        ops.star([a])
        ops.star([b])
        ops.star([c])
    _age(store)
    with pytest.raises(TransientError):
        propagate_pending(store, account, Scripted(fail_after=1), NOW)
    rows = {r.message_id: r for r in _rows(store)}
    assert rows[a].state == "done"
    assert [(rows[m].state, rows[m].attempts) for m in (b, c)] == [("pending", 0)] * 2
    assert rows[b].next_attempt_at == NOW  # due again at once
    run = propagate_pending(store, account, Scripted("lost"), NOW)
    assert run.lost == 2 and run.retried == 0
    assert {(r.state, r.attempts) for r in _rows(store) if r.message_id != a} == {("pending", 0)}


def test_a_provider_bug_is_charged_so_it_ends_failed(store: Store) -> None:
    """An unexpected exception charges the unreported changes an attempt (not an endless loop)."""
    user, account, (a, *_rest) = _setup(store)
    with store.session() as session:
        Operations(session, user).star([a])
    _age(store)
    run = propagate_pending(store, account, Scripted("bug"), NOW)
    assert run.retried == 1
    (row,) = _rows(store)
    assert row.attempts == 1 and row.last_error == "a bug in the provider"


def test_done_writes_the_providers_record_in_the_same_transaction(store: Store) -> None:
    """An outcome's record runs in the transaction that marks its changes done."""
    user, account, (a, *_rest) = _setup(store)
    with store.session() as session:
        Operations(session, user).star([a])
    _age(store)
    seen: list[str] = []

    class Recording(Scripted):
        def propagate(self, account_id: int, batch: Sequence[MessageChanges]) -> Iterator[Outcome]:
            for changes in batch:

                def record(session: object, ids: tuple[int, ...] = changes.ids) -> None:
                    state = session.scalar(  # type: ignore[attr-defined]
                        select(PendingChange.state).where(PendingChange.id == ids[0])
                    )
                    seen.append(state)

                yield Outcome.done(changes, record)

    assert propagate_pending(store, account, Recording(), NOW).done == 1
    assert seen == ["pending"]  # before the mark, inside the same session
    assert {r.state for r in _rows(store)} == {"done"}


@pytest.fixture
def woken() -> Iterator[list[list[int]]]:
    """Record what the after-commit hook wakes, for one test."""
    calls: list[list[int]] = []

    def waker(accounts: Sequence[int]) -> None:
        calls.append(list(accounts))

    propagation.WAKERS.append(waker)
    yield calls
    propagation.WAKERS.remove(waker)


def test_the_hook_fires_once_per_account_after_the_commit(
    store: Store, woken: list[list[int]]
) -> None:
    """Several actions in one transaction wake the account once, and only after the commit."""
    user, account, (a, b, _c) = _setup(store)
    with store.session() as session:
        ops = Operations(session, user)
        ops.star([a])
        with session.begin_nested():  # a released savepoint is not the commit
            ops.archive([b])
        ops.mark_read([a, b])
        session.flush()
        assert woken == []  # never inside the transaction
    assert woken == [[account]]


def test_the_hook_does_not_fire_on_rollback(store: Store, woken: list[list[int]]) -> None:
    """An action whose transaction rolls back wakes nobody, and leaves nothing for the next one."""
    user, account, (a, *_rest) = _setup(store)
    with pytest.raises(RuntimeError), store.session() as session:
        Operations(session, user).star([a])
        raise RuntimeError("the request failed")
    assert woken == []
    assert _rows(store) == []
    with store.session() as session:  # a later commit of another session wakes only its own
        session.scalar(select(PendingChange.id))
    assert woken == []


def test_an_action_without_changes_wakes_nobody(store: Store, woken: list[list[int]]) -> None:
    """Repeating an action changes nothing, so nothing is queued and nothing is woken."""
    user, account, (a, *_rest) = _setup(store)
    with store.session() as session:
        Operations(session, user).star([a])
    assert woken == [[account]]
    with store.session() as session:
        Operations(session, user).star([a])
    assert woken == [[account]]


def test_a_backlog_larger_than_a_batch_is_carried_in_one_run(store: Store) -> None:
    """More due changes than one batch holds are offered batch after batch until none is left."""
    user, account, ids = _setup(store)
    with store.session() as session:
        Operations(session, user).star(ids)
    _age(store)
    propagator = Scripted()
    assert propagate_pending(store, account, propagator, NOW, limit=2).done == 3
    assert [len(batch) for batch in propagator.batches] == [2, 1]
