"""The change log: state tokens and folding changes for /changes."""

from __future__ import annotations

import threading

from mailroom.store import changelog
from mailroom.store.engine import Store
from tests.helpers import make_account


def test_state_starts_at_zero_and_follows_records(store: Store) -> None:
    """A user's state is "0" before any change and the newest sequence after."""
    user_id, _, _ = make_account(store)
    with store.session() as session:
        assert changelog.current_state(session, user_id, "Email") == "0"
        changelog.record(session, user_id, "Email", [1, 2], "created")
        state = changelog.current_state(session, user_id, "Email")
    assert int(state) > 0
    with store.session() as session:
        assert changelog.current_state(session, user_id, "Thread") == "0"


def test_changes_fold_created_updated_destroyed(store: Store) -> None:
    """Created-then-updated is created; created-then-destroyed vanishes; others as recorded."""
    user_id, _, _ = make_account(store)
    with store.session() as session:
        changelog.record(session, user_id, "Email", [10], "updated")
        since = int(changelog.current_state(session, user_id, "Email"))
        changelog.record(session, user_id, "Email", [1, 2, 3], "created")
        changelog.record(session, user_id, "Email", [1], "updated")
        changelog.record(session, user_id, "Email", [2], "destroyed")
        changelog.record(session, user_id, "Email", [10], "destroyed")
        changelog.record(session, user_id, "Email", [11], "updated")
        result = changelog.changes_since(session, user_id, "Email", since)
        state = changelog.current_state(session, user_id, "Email")
    assert sorted(result.created) == [1, 3]
    assert result.updated == [11]
    assert result.destroyed == [10]
    assert str(result.new_state) == state
    assert not result.has_more


def test_max_changes_pages_with_has_more(store: Store) -> None:
    """maxChanges cuts the window and says there is more; following it reaches the end."""
    user_id, _, _ = make_account(store)
    with store.session() as session:
        changelog.record(session, user_id, "Thread", range(1, 6), "updated")
        first = changelog.changes_since(session, user_id, "Thread", 0, max_changes=3)
        second = changelog.changes_since(session, user_id, "Thread", first.new_state, 3)
    assert first.has_more and first.updated == [1, 2, 3]
    assert not second.has_more and second.updated == [4, 5]


def test_users_have_separate_states(store: Store) -> None:
    """One user's changes never move another user's state."""
    alice, _, _ = make_account(store, owner="alice")
    bob, _, _ = make_account(store, owner="bob")
    with store.session() as session:
        changelog.record(session, alice, "Email", [1], "created")
        assert changelog.current_state(session, bob, "Email") == "0"
        assert changelog.changes_since(session, bob, "Email", 0).created == []


def test_a_second_writer_of_the_same_user_commits_after_the_first(store: Store) -> None:
    """Change rows become visible in sequence order: a later writer waits for an earlier one."""
    user_id, _, _ = make_account(store)
    recorded, release = threading.Event(), threading.Event()
    order: list[str] = []

    def first() -> None:
        with store.session() as session:
            changelog.record(session, user_id, "Email", [1], "created")
            recorded.set()
            release.wait(10)
            order.append("first commits")

    def second() -> None:
        with store.session() as session:
            changelog.record(session, user_id, "Email", [2], "created")
            order.append("second commits")

    one = threading.Thread(target=first)
    two = threading.Thread(target=second)
    one.start()
    try:
        assert recorded.wait(10)
        two.start()
        two.join(0.5)
        assert two.is_alive()  # waiting for the first writer
    finally:
        release.set()
        one.join(10)
        if two.ident is not None:
            two.join(10)
    assert order == ["first commits", "second commits"]
    with store.session() as session:
        result = changelog.changes_since(session, user_id, "Email", 0)
    assert result.created == [1, 2]
