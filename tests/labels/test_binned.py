"""The stored "binned" flag and the thread label union stay right on every write path."""

from __future__ import annotations

from sqlalchemy import delete, select, text, update

from mailroom.labels.operations import Operations
from mailroom.labels.resolver import resolve_path, system_label
from mailroom.store.engine import Store
from mailroom.store.models import Label, Message, MessageLabel, Thread
from tests.factories import make_message
from tests.helpers import ingest, make_account


def _binned(store: Store, thread_id: int) -> bool:
    with store.session() as session:
        thread = session.get(Thread, thread_id)
        assert thread is not None
        return thread.in_trash


def _two_message_thread(store: Store) -> tuple[int, int, list[int], tuple[int, int, int]]:
    account = make_account(store)
    result = ingest(
        store, account, [("a", make_message("a@x")), ("b", make_message("b@x", in_reply_to="a@x"))]
    )
    with store.session() as session:
        thread = session.scalar(select(Message.thread_id).where(Message.provider_id == "a"))
    assert thread is not None
    return account[0], thread, sorted(result.created_ids), account


def test_orm_label_changes_bin_and_unbin(store: Store) -> None:
    """Adding Trash to every message through the ORM bins; removing one unbins."""
    user, thread, ids, _ = _two_message_thread(store)
    with store.session() as session:
        trash = system_label(session, user, "trash").id
        session.add_all(MessageLabel(message_id=m, label_id=trash) for m in ids)
    assert _binned(store, thread)
    with store.session() as session:
        session.delete(session.get(MessageLabel, (ids[0], trash)))
    assert not _binned(store, thread)


def test_raw_sql_label_changes_bin(store: Store) -> None:
    """Plain SQL inserts into message_labels keep the flag too."""
    user, thread, ids, _ = _two_message_thread(store)
    with store.session() as session:
        trash = system_label(session, user, "trash").id
        for message_id in ids:
            session.execute(
                text("INSERT INTO message_labels (message_id, label_id) VALUES (:m, :l)"),
                {"m": message_id, "l": trash},
            )
    assert _binned(store, thread)


def test_cascading_delete_of_the_only_untrashed_message_bins(store: Store) -> None:
    """Deleting the one message outside Trash (a cascade from its account row) bins the rest."""
    user, thread, ids, _account = _two_message_thread(store)
    with store.session() as session:
        Operations(session, user).trash([ids[0]])
    assert not _binned(store, thread)
    with store.session() as session:
        session.execute(delete(Message).where(Message.id == ids[1]))
    assert _binned(store, thread)


def test_deleting_the_trash_label_cascades_and_unbins(store: Store) -> None:
    """Dropping a label row cascades through message and thread labels."""
    user, thread, ids, _ = _two_message_thread(store)
    with store.session() as session:
        Operations(session, user).trash(ids)
    assert _binned(store, thread)
    with store.session() as session:
        session.execute(delete(Label).where(Label.role == "trash"))
    assert not _binned(store, thread)


def test_moving_messages_between_threads_updates_both(store: Store) -> None:
    """A trashed message moving into a live thread unbins its old thread's state correctly."""
    user, thread, ids, account = _two_message_thread(store)
    other = ingest(store, account, [("c", make_message("c@x"))]).created_ids[0]
    with store.session() as session:
        Operations(session, user).trash([other])
        other_thread = session.scalar(select(Message.thread_id).where(Message.id == other))
    assert other_thread is not None and _binned(store, other_thread)
    with store.session() as session:
        session.execute(update(Message).where(Message.id == other).values(thread_id=thread))
    assert not _binned(store, thread)
    with store.session() as session:
        t = session.get(Thread, other_thread)
        assert t is not None and t.message_count == 0 and not t.in_trash


def test_new_message_arriving_unbins_a_thread(store: Store) -> None:
    """A reply stored into a binned thread takes it out of the bin."""
    user, thread, ids, account = _two_message_thread(store)
    with store.session() as session:
        Operations(session, user).trash(ids)
    assert _binned(store, thread)
    ingest(store, account, [("d", make_message("d@x", in_reply_to="b@x"))])
    assert not _binned(store, thread)


def test_binned_threads_leave_lists_and_search(store: Store) -> None:
    """Lists and search leave binned threads out."""
    from mailroom.reading import newest_threads, search_ids

    user, thread, ids, _ = _two_message_thread(store)
    with store.session() as session:
        assert [t["id"] for t in newest_threads(session, user)] == [thread]
        assert search_ids(session, user, "hi") != []
        Operations(session, user).trash(ids)
    with store.session() as session:
        assert newest_threads(session, user) == []
        assert search_ids(session, user, "hi") == []
        resolve_path(session, user, ["Keep"])  # unrelated labels do not matter
