"""The operations service: a whole label set is honoured as given; keywords are kept and queued."""

from __future__ import annotations

from sqlalchemy import func, select

from mailroom.labels.keywords import stored_keywords
from mailroom.labels.operations import Operations
from mailroom.labels.resolver import resolve_path
from mailroom.store import changelog
from mailroom.store.engine import Store
from mailroom.store.models import Label, MessageLabel, PendingChange
from tests.factories import make_message
from tests.helpers import ingest, make_account


def _one_message(store: Store) -> tuple[int, int]:
    """(user id, message id) of one message in the Inbox."""
    account = make_account(store)
    result = ingest(store, account, [("a", make_message("a@x"))])
    return account[0], result.created_ids[0]


def _labels(store: Store, message_id: int) -> set[str]:
    with store.session() as session:
        return set(
            session.scalars(
                select(func.coalesce(Label.role, Label.path))
                .join(MessageLabel, MessageLabel.label_id == Label.id)
                .where(MessageLabel.message_id == message_id)
            )
        )


def test_a_whole_set_is_honoured_and_the_invariant_still_covers_the_rest(store: Store) -> None:
    """set_labels {Inbox} → {Work} leaves Work alone; then removing Work gives Archive back."""
    user, message = _one_message(store)
    with store.session() as session:
        ops = Operations(session, user)
        work = resolve_path(session, user, ["Work"]).id
        assert ops.set_labels([message], {ops.role("inbox")}, {work}) == [message]
    assert _labels(store, message) == {"Work"}
    with store.session() as session:
        ops = Operations(session, user)
        both = {ops.role("inbox"), ops.role("archive")}
        ops.set_labels([message], {work}, both)
    assert _labels(store, message) == {"inbox", "archive"}
    with store.session() as session:
        ops = Operations(session, user)
        ops.set_labels([message], both, {work})
        ops.label([message], work, on=False)  # an ordinary operation: a location comes back
    assert _labels(store, message) == {"archive"}


def test_set_keywords_is_idempotent_logged_and_queued(store: Store) -> None:
    """Keywords are stored once, logged as an Email change and queued; repeating does nothing."""
    user, message = _one_message(store)
    with store.session() as session:
        before = int(changelog.current_state(session, user, "Email"))
        ops = Operations(session, user)
        assert ops.set_keywords([message], {"$answered", "work"}, set()) == [message]
        assert ops.set_keywords([message], {"$answered"}, set()) == []
        assert ops.set_keywords([message], {"$seen", "$flagged"}, set()) == []
        assert ops.set_keywords([message], set(), {"work", "absent"}) == [message]
        log = changelog.changes_since(session, user, "Email", before)
        queued = session.scalars(
            select(PendingChange.payload).where(PendingChange.message_id == message)
        ).all()
        assert stored_keywords(session, [message]) == {message: {"$answered"}}
    assert log.updated == [message]
    assert list(queued) == [
        {"keywords": {"$answered": True, "work": True}},
        {"keywords": {"work": False, "absent": False}},
    ]
