"""The Gmail backfill state: inbox first, then the whole mailbox; cooldowns, the cap, the store."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import delete

from mailroom.providers.gmail.backfill import (
    ABANDONED,
    BACKFILL_COOLDOWN,
    BACKFILL_MAX_ATTEMPTS,
    FINISHED,
    INBOX,
    MAILBOX,
    BackfillState,
    due_backfills,
    load_backfill,
    save_backfill,
)
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.factories import BASE_TIME
from tests.helpers import make_account

NOW = BASE_TIME


def test_the_constants_are_the_specified_ones() -> None:
    """An hour's cooldown and 24 attempts (SPEC §1)."""
    assert timedelta(hours=1) == BACKFILL_COOLDOWN
    assert BACKFILL_MAX_ATTEMPTS == 24


def test_inbox_pages_then_the_whole_mailbox_then_finished() -> None:
    """Pages follow the tokens; the inbox's last page starts the mailbox, whose last one ends it."""
    state = BackfillState()
    assert state.phase == INBOX and state.due(NOW)
    assert state.list_params() == {"maxResults": "500", "labelIds": "INBOX"}
    state = state.next_page("t1", NOW)
    assert state.list_params() == {"maxResults": "500", "labelIds": "INBOX", "pageToken": "t1"}
    state = state.next_page(None, NOW)
    assert (state.phase, state.page_token) == (MAILBOX, None)
    assert state.list_params() == {"maxResults": "500", "includeSpamTrash": "true"}
    state = state.next_page("m1", NOW).next_page(None, NOW + timedelta(minutes=5))
    assert state.phase == FINISHED and state.done
    assert state.finished_at == NOW + timedelta(minutes=5)
    assert not state.due(NOW + timedelta(days=30))
    assert state.next_page("again", NOW) == state  # an ended backfill stays ended


def test_a_failure_waits_an_hour_at_the_same_page() -> None:
    """A failed attempt keeps the page token, counts one attempt and waits the cooldown."""
    state = BackfillState().next_page("t7", NOW).failed_attempt(NOW, "Gmail did not answer.")
    assert (state.phase, state.page_token, state.attempts) == (INBOX, "t7", 1)
    assert state.last_error == "Gmail did not answer."
    assert not state.due(NOW + BACKFILL_COOLDOWN - timedelta(seconds=1))
    assert state.due(NOW + BACKFILL_COOLDOWN)
    after = state.next_page("t8", NOW + BACKFILL_COOLDOWN)
    assert (after.page_token, after.attempts, after.not_before) == ("t8", 1, None)


def test_the_24th_failure_abandons_the_backfill() -> None:
    """Attempts add up over the whole backfill; the 24th failure ends it as abandoned."""
    state = BackfillState()
    moment = NOW
    for attempt in range(1, BACKFILL_MAX_ATTEMPTS):
        state = state.failed_attempt(moment, f"failure {attempt}").next_page(f"p{attempt}", moment)
        moment += BACKFILL_COOLDOWN
        assert state.phase == INBOX and state.attempts == attempt
    state = state.failed_attempt(moment, "the last straw")
    assert state.phase == ABANDONED and state.done
    assert (state.attempts, state.finished_at) == (24, moment)
    assert not state.due(moment + timedelta(days=1))
    assert state.failed_attempt(moment, "more") == state


def test_a_quota_deferral_is_no_attempt() -> None:
    """A rejection defers to the end of the minute without counting an attempt."""
    state = BackfillState().deferred(NOW + timedelta(seconds=60))
    assert state.attempts == 0
    assert not state.due(NOW + timedelta(seconds=59))
    assert state.due(NOW + timedelta(seconds=60))
    cooling = BackfillState().failed_attempt(NOW, "down")
    assert cooling.deferred(NOW + timedelta(seconds=60)).not_before == NOW + BACKFILL_COOLDOWN


def test_a_restart_begins_at_the_inbox() -> None:
    """An expired history starts the backfill over at the inbox's first page."""
    state = BackfillState().next_page(None, NOW).next_page("m3", NOW).failed_attempt(NOW, "x")
    assert state.restarted() == BackfillState()


def test_the_state_survives_the_store(store: Store) -> None:
    """A saved state loads back as it was; an account without one starts fresh."""
    _, account_id, _ = make_account(store)
    with store.session() as session:
        assert load_backfill(session, account_id) == BackfillState()
    long_token = "T" * 5_000  # Google's tokens are opaque: no length may cut them
    state = BackfillState().next_page(None, NOW).next_page(long_token, NOW)
    state = state.failed_attempt(NOW, "The Gmail API answered 500. " * 200)
    with store.session() as session:
        save_backfill(session, account_id, state)
    with store.session() as session:
        loaded = load_backfill(session, account_id)
    assert loaded == state
    assert loaded.page_token == long_token
    assert loaded.last_error is not None and len(loaded.last_error) == 2_000
    finished = loaded.next_page(None, NOW + timedelta(hours=2))
    with store.session() as session:
        save_backfill(session, account_id, finished)
    with store.session() as session:
        assert load_backfill(session, account_id) == finished


def test_due_backfills_lists_only_accounts_that_may_run(store: Store) -> None:
    """Due: live and past any wait; cooling, deferred, finished and abandoned ones are not."""
    ids = {name: make_account(store, name=name)[1] for name in ("a", "b", "c", "d", "e", "f")}
    states = {
        "a": BackfillState(),
        "b": BackfillState().next_page(None, NOW).next_page("m1", NOW),
        "c": BackfillState().failed_attempt(NOW, "down"),
        "d": BackfillState().deferred(NOW + timedelta(seconds=30)),
        "e": BackfillState().next_page(None, NOW).next_page(None, NOW),
        "f": BackfillState(attempts=23).failed_attempt(NOW, "down"),
    }
    with store.session() as session:
        for name, state in states.items():
            save_backfill(session, ids[name], state)
    with store.session() as session:
        assert due_backfills(session, NOW) == [ids["a"], ids["b"]]
        later = due_backfills(session, NOW + BACKFILL_COOLDOWN)
        assert later == [ids["a"], ids["b"], ids["c"], ids["d"]]


@pytest.mark.parametrize("phase", [INBOX, FINISHED])
def test_the_state_goes_with_its_account(store: Store, phase: str) -> None:
    """Deleting an account deletes its backfill state (no orphan row stays due)."""
    _, account_id, _ = make_account(store)
    with store.session() as session:
        save_backfill(session, account_id, BackfillState(phase=phase))
    with store.session() as session:
        session.execute(delete(Account).where(Account.id == account_id))
    with store.session() as session:
        assert load_backfill(session, account_id) == BackfillState()
        assert due_backfills(session, NOW) == []
