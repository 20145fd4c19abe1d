"""Storing batches: exactly once, with bodies, raw bytes, labels, search and changes."""

from __future__ import annotations

from sqlalchemy import func, select, text

from mailroom.reading import search_ids
from mailroom.store.engine import Store
from mailroom.store.models import Blob, Change, Message, MessageBody, Thread, ThreadLabel
from tests.factories import make_message
from tests.helpers import ingest, make_account


def _count(store: Store, model: type) -> int:
    with store.session() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


def test_same_batch_twice_stores_each_message_once(store: Store) -> None:
    """Re-running a batch inserts nothing and records no second "created" change."""
    account = make_account(store)
    raws = [(f"p{i}", make_message(f"m{i}@x", subject=f"S{i}")) for i in range(5)]
    first = ingest(store, account, raws)
    second = ingest(store, account, raws)
    assert len(first.created_ids) == 5 and second.created_ids == []
    assert len(second.duplicate_ids) == 5
    assert _count(store, Message) == 5
    with store.session() as session:
        created = session.scalar(
            select(func.count())
            .select_from(Change)
            .where(Change.type == "Email", Change.kind == "created")
        )
    assert created == 5


def test_overlapping_batches_and_repeats_inside_a_batch(store: Store) -> None:
    """A provider id repeated inside a batch and across batches is one message."""
    account = make_account(store)
    a = ("a", make_message("a@x"))
    b = ("b", make_message("b@x"))
    c = ("c", make_message("c@x"))
    ingest(store, account, [a, b, a])
    ingest(store, account, [b, c])
    assert _count(store, Message) == 3


def test_bodies_raw_bytes_and_search_are_stored(store: Store) -> None:
    """A stored message keeps its raw bytes, sanitized HTML and is searchable at once."""
    account = make_account(store)
    raw = make_message(
        "html@x",
        subject="Quarterly numbers",
        body="plain zebra text",
        html="<p onclick='x()'>Hello <script>alert(1)</script><b>zebra</b></p>",
    )
    result = ingest(store, account, [("h", raw)])
    (message_id,) = result.created_ids
    with store.session() as session:
        message = session.get(Message, message_id)
        assert message is not None and message.raw_sha256
        blob = session.get(Blob, message.raw_sha256)
        assert blob is not None and blob.data == raw
        body = session.get(MessageBody, message_id)
        assert body is not None and body.html_body and "<script>" in body.html_body
        assert body.sanitized_html and "script" not in body.sanitized_html
        assert "onclick" not in body.sanitized_html
        assert search_ids(session, account[0], "zebra") == [message_id]
        assert search_ids(session, account[0], "quarterly") == [message_id]
        assert search_ids(session, account[0], "alice@example.org") == [message_id]
        assert search_ids(session, account[0], "giraffe") == []


def test_broken_message_is_stored_with_notes_and_batch_survives(store: Store) -> None:
    """Junk bytes are kept with a parse note next to good messages of the same batch."""
    account = make_account(store)
    junk = b"\xff\xfe\x00garbage without headers\r\n\r\n\x80\x81"
    result = ingest(store, account, [("junk", junk), ("good", make_message("g@x"))])
    assert len(result.created_ids) == 2 and not result.failed
    with store.session() as session:
        notes = session.scalars(select(Message.parse_notes)).all()
        raw = session.scalar(
            select(Blob.data)
            .join(Message, Message.raw_sha256 == Blob.sha256)
            .where(Message.provider_id == "junk")
        )
    assert raw == junk
    assert any(notes)


def test_thread_counters_and_label_union_follow_messages(store: Store) -> None:
    """Triggers keep message/unread counts and the label union of a thread."""
    account = make_account(store)
    ingest(
        store,
        account,
        [("r", make_message("root@x")), ("a", make_message("reply@x", in_reply_to="root@x"))],
    )
    with store.session() as session:
        (thread,) = session.scalars(select(Thread)).all()
        assert thread.message_count == 2 and thread.unread_count == 2
        labels = session.scalars(select(ThreadLabel.message_count)).all()
        assert labels == [2]
        session.execute(text("UPDATE messages SET seen_at = created_at WHERE provider_id = 'r'"))
        session.execute(text("DELETE FROM messages WHERE provider_id = 'a'"))
    with store.session() as session:
        (thread,) = session.scalars(select(Thread)).all()
        assert thread.message_count == 1 and thread.unread_count == 0
        assert session.scalars(select(ThreadLabel.message_count)).all() == [1]
