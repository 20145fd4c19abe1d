"""The operations service: label changes, thread union, change log and pending changes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from mailroom.errors import NotFoundError
from mailroom.labels.operations import Operations
from mailroom.labels.resolver import resolve_path
from mailroom.store import changelog
from mailroom.store.engine import Store
from mailroom.store.models import (
    Label,
    Message,
    MessageLabel,
    PendingChange,
    Thread,
    ThreadLabel,
)
from tests.factories import make_message
from tests.helpers import ingest, make_account


def _setup(store: Store) -> tuple[int, int, list[int]]:
    """A user with one two-message thread in the Inbox; returns (user, thread, message ids)."""
    account = make_account(store)
    result = ingest(
        store,
        account,
        [("a", make_message("a@x")), ("b", make_message("b@x", in_reply_to="a@x"))],
    )
    with store.session() as session:
        thread = session.scalar(
            select(Message.thread_id).where(Message.id == result.created_ids[0])
        )
    assert thread is not None
    return account[0], thread, sorted(result.created_ids)


def _roles(store: Store, message_id: int) -> set[str]:
    with store.session() as session:
        rows = session.scalars(
            select(func.coalesce(Label.role, Label.path))
            .join(MessageLabel, MessageLabel.label_id == Label.id)
            .where(MessageLabel.message_id == message_id)
        )
        return set(rows)


def _thread_roles(store: Store, thread_id: int) -> set[str]:
    with store.session() as session:
        rows = session.scalars(
            select(func.coalesce(Label.role, Label.path))
            .join(ThreadLabel, ThreadLabel.label_id == Label.id)
            .where(ThreadLabel.thread_id == thread_id)
        )
        return set(rows)


def _pending(store: Store, operation: str) -> int:
    with store.session() as session:
        return int(
            session.scalar(
                select(func.count())
                .select_from(PendingChange)
                .where(PendingChange.operation == operation, PendingChange.state == "pending")
            )
            or 0
        )


def test_archive_removes_inbox_keeps_a_location_and_logs(store: Store) -> None:
    """Archive takes the thread out of the Inbox, gives Archive, logs and queues per message."""
    user, thread, ids = _setup(store)
    with store.session() as session:
        before = int(changelog.current_state(session, user, "Email"))
        boxes_before = int(changelog.current_state(session, user, "Mailbox"))
        threads_before = int(changelog.current_state(session, user, "Thread"))
        changed = Operations(session, user).archive(ids)
        log = changelog.changes_since(session, user, "Email", before)
        threads = changelog.changes_since(session, user, "Thread", threads_before)
        boxes = changelog.changes_since(session, user, "Mailbox", boxes_before)
    assert changed == ids
    assert _roles(store, ids[0]) == {"archive"}
    assert _thread_roles(store, thread) == {"archive"}
    assert sorted(log.updated) == ids
    assert thread in threads.updated
    assert len(boxes.updated) == 2  # Inbox and Archive counts changed
    assert _pending(store, "archive") == 2


def test_operations_are_idempotent(store: Store) -> None:
    """Repeating an operation changes nothing, logs nothing and queues nothing."""
    user, _thread, ids = _setup(store)
    with store.session() as session:
        Operations(session, user).trash(ids)
        state = changelog.current_state(session, user, "Email")
        assert Operations(session, user).trash(ids) == []
        assert changelog.current_state(session, user, "Email") == state
    assert _pending(store, "trash") == 2


def test_trash_bins_thread_and_restore_returns_it(store: Store) -> None:
    """Trash bins the whole thread (stored flag); restore brings it back to the Inbox."""
    user, thread, ids = _setup(store)
    with store.session() as session:
        Operations(session, user).trash([ids[0]])
    with store.session() as session:
        binned = session.get(Thread, thread)
        assert binned is not None and not binned.in_trash  # one message still outside Trash
        Operations(session, user).trash(ids)
    with store.session() as session:
        binned = session.get(Thread, thread)
        assert binned is not None and binned.in_trash
        Operations(session, user).restore(ids)
    with store.session() as session:
        restored = session.get(Thread, thread)
        assert restored is not None and not restored.in_trash
    assert _roles(store, ids[1]) == {"inbox"}


def test_star_read_and_labels(store: Store) -> None:
    """Star, read/unread and user labels change only what they name."""
    user, thread, ids = _setup(store)
    with store.session() as session:
        ops = Operations(session, user)
        ops.star([ids[1]])
        assert ops.mark_read(ids) == ids
        assert ops.mark_read(ids) == []
        receipts = resolve_path(session, user, ["Receipts"]).id
        ops.label(ids, receipts)
    with store.session() as session:
        t = session.get(Thread, thread)
        assert t is not None and t.unread_count == 0
        assert session.scalar(select(func.count()).where(Message.seen_at.is_(None))) == 0
    assert _roles(store, ids[1]) == {"inbox", "starred", "Receipts"}
    assert _thread_roles(store, thread) == {"inbox", "starred", "Receipts"}
    with store.session() as session:
        Operations(session, user).mark_read([ids[0]], read=False)
        t = session.get(Thread, thread)
        assert t is not None and t.unread_count == 1


def test_removing_the_last_location_adds_archive(store: Store) -> None:
    """Unlabelling Inbox from a message with only a user label leaves it in Archive."""
    user, _thread, ids = _setup(store)
    with store.session() as session:
        ops = Operations(session, user)
        work = resolve_path(session, user, ["Work"]).id
        ops.label(ids, work)
        ops.label(ids, ops.role("inbox"), on=False)
    assert _roles(store, ids[0]) == {"Work", "archive"}


def test_spam_and_move_to_inbox(store: Store) -> None:
    """Spam leaves the Inbox; moving to the Inbox clears Spam, Trash and Archive."""
    user, _thread, ids = _setup(store)
    with store.session() as session:
        Operations(session, user).spam(ids)
    assert _roles(store, ids[0]) == {"spam"}
    with store.session() as session:
        Operations(session, user).move_to_inbox(ids)
    assert _roles(store, ids[0]) == {"inbox"}


def test_delete_forever_keeps_the_pending_change(store: Store) -> None:
    """Deleting removes the messages, destroys them in the log and keeps a delete entry."""
    user, thread, ids = _setup(store)
    with store.session() as session:
        Operations(session, user).delete_forever(ids)
        log = changelog.changes_since(session, user, "Email", 0)
        entries = session.scalars(
            select(PendingChange).where(PendingChange.operation == "delete")
        ).all()
        assert session.scalar(select(func.count()).select_from(Message)) == 0
        t = session.get(Thread, thread)
        assert t is None or t.message_count == 0
    assert sorted(log.destroyed) == [] and log.created == []  # created and destroyed in window
    assert {e.provider_id for e in entries} == {"a", "b"}
    assert all(e.message_id is None for e in entries)


def test_another_users_thread_is_not_found(store: Store) -> None:
    """Operations refuse ids that belong to another user."""
    _user, thread, ids = _setup(store)
    other, _, _ = make_account(store, owner="mallory", name="m")
    with store.session() as session:
        ops = Operations(session, other)
        with pytest.raises(NotFoundError):
            ops.archive(ids)
        with pytest.raises(NotFoundError):
            ops.messages_of_threads([thread])


def test_snooze_and_wake_with_injected_time(store: Store) -> None:
    """Snooze moves a thread to Snoozed; the due wake returns it to the Inbox, unread."""
    user, thread, ids = _setup(store)
    now = datetime(2030, 1, 1, 12, tzinfo=UTC)
    with store.session() as session:
        ops = Operations(session, user, now=lambda: now)
        ops.mark_read(ids)
        ops.snooze([thread], now + timedelta(hours=2))
    assert _thread_roles(store, thread) == {"snoozed", "archive"}  # Archive: where it lives
    with store.session() as session:
        early = Operations(session, user, now=lambda: now + timedelta(hours=1))
        assert early.wake_due() == []
        late = Operations(session, user, now=lambda: now + timedelta(hours=3))
        assert late.wake_due() == [thread]
    with store.session() as session:
        t = session.get(Thread, thread)
        assert t is not None and t.snoozed_until is None and t.unread_count == 1
    assert _thread_roles(store, thread) == {"inbox"}


def test_a_reply_wakes_a_snoozed_thread_early(store: Store) -> None:
    """New mail from someone else in a snoozed thread brings it back to the Inbox at once."""
    user, thread, ids = _setup(store)
    with store.session() as session:
        Operations(session, user).snooze([thread], datetime(2099, 1, 1, tzinfo=UTC))
    assert _thread_roles(store, thread) == {"snoozed", "archive"}
    account = (user, *_account_ids(store))
    ingest(store, account, [("c", make_message("c@x", in_reply_to="b@x", sender="Carol <c@y>"))])
    assert "inbox" in _thread_roles(store, thread) and "snoozed" not in _thread_roles(store, thread)
    with store.session() as session:
        t = session.get(Thread, thread)
        assert t is not None and t.snoozed_until is None


def _account_ids(store: Store) -> tuple[int, int]:
    """(account id, inbox label id) of the test account."""
    from mailroom.store.models import Account

    with store.session() as session:
        account = session.scalars(select(Account)).first()
        assert account is not None
        inbox = session.scalar(select(Label.id).where(Label.role == "inbox"))
        assert inbox is not None
        return account.id, inbox


def test_set_labels_names_the_action_a_mailbox_change_means(store: Store) -> None:
    """The service names a new label set's action: trash, restore, archive, star, label, move."""
    user, _thread, (a, _b) = _setup(store)
    with store.session() as session:
        ops = Operations(session, user)
        inbox, trash, archive = ops.role("inbox"), ops.role("trash"), ops.role("archive")
        starred = ops.role("starred")
        work = resolve_path(session, user, ["Work"]).id
        steps = [
            ({inbox}, {trash}),
            ({trash}, {inbox}),
            ({inbox}, {archive}),
            ({archive}, {archive, starred}),
            ({archive, starred}, {archive, starred, work}),
            ({archive, starred, work}, {inbox, starred}),
        ]
        for before, after in steps:
            assert ops.set_labels([a], before, after) == [a]
        assert ops.set_labels([a], {inbox}, {inbox}) == []
        names = list(
            session.scalars(
                select(PendingChange.operation)
                .where(PendingChange.message_id == a)
                .order_by(PendingChange.id)
            )
        )
    assert names == ["trash", "restore", "archive", "star", "label", "inbox"]
