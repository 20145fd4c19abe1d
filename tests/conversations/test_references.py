"""Threading by References / In-Reply-To, whatever the arrival order."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from mailroom.store.engine import Store, open_store
from mailroom.store.models import Change, Message
from tests.factories import make_message
from tests.helpers import ingest, make_account, thread_of

# Two conversations: a → b → c (c references both), and x → y; w answers "Plan" without
# references (joins by subject: shares Alice and Bob), z does too but shares nobody (alone).
CONVERSATIONS = [
    ("a", make_message("a@x", subject="Plan")),
    ("b", make_message("b@x", subject="Re: Plan", in_reply_to="a@x", references=["a@x"])),
    ("c", make_message("c@x", subject="Re: Plan", in_reply_to="b@x", references=["a@x", "b@x"])),
    ("x", make_message("x@x", subject="Other")),
    ("y", make_message("y@x", subject="Re: Other", in_reply_to="x@x", references=["x@x"])),
    ("w", make_message("w@x", subject="RE: Plan", sender="Bob <bob@example.net>", minutes=5)),
    ("z", make_message("z@x", subject="Re: Plan", sender="eve@example.com", to="mallory@x.test")),
]


def _partition(store: Store) -> set[frozenset[str]]:
    with store.session() as session:
        rows = session.execute(select(Message.provider_id, Message.thread_id)).all()
    groups: dict[int, set[str]] = {}
    for provider_id, thread_id in rows:
        groups.setdefault(thread_id, set()).add(provider_id)
    return {frozenset(group) for group in groups.values()}


EXPECTED = {frozenset("abcw"), frozenset("xy"), frozenset("z")}


def test_reply_joins_parent_thread(store: Store) -> None:
    """A reply stored after its parent lands in the parent's thread."""
    account = make_account(store)
    ingest(store, account, CONVERSATIONS)
    assert _partition(store) == EXPECTED


def test_parent_arriving_later_adopts_its_replies(store: Store) -> None:
    """Replies stored first are pulled into one thread when the parent arrives."""
    account = make_account(store)
    by_id = dict(CONVERSATIONS)
    ingest(store, account, [("c", by_id["c"])])
    ingest(store, account, [("b", by_id["b"])])
    ingest(store, account, [("a", by_id["a"])])
    assert thread_of(store, "a@x") == thread_of(store, "b@x") == thread_of(store, "c@x")


def test_siblings_of_a_missing_parent_share_a_thread(store: Store) -> None:
    """Two replies to a message that never arrived still form one conversation."""
    account = make_account(store)
    ingest(store, account, [("s1", make_message("s1@x", in_reply_to="gone@x"))])
    ingest(store, account, [("s2", make_message("s2@x", in_reply_to="gone@x"))])
    assert thread_of(store, "s1@x") == thread_of(store, "s2@x")


def test_merge_reports_destroyed_thread_and_moved_messages(store: Store) -> None:
    """A message joining two threads merges them: one destroyed, its messages updated."""
    account = make_account(store)
    ingest(store, account, [("leaf", make_message("leaf@x", in_reply_to="mid@x"))])
    ingest(store, account, [("root", make_message("root@x"))])
    older, newer = thread_of(store, "leaf@x"), thread_of(store, "root@x")
    assert older is not None and newer is not None and older < newer
    ingest(store, account, [("mid", make_message("mid@x", in_reply_to="root@x"))])
    assert thread_of(store, "root@x") == thread_of(store, "mid@x") == older
    with store.session() as session:
        destroyed = session.scalars(
            select(Change.object_id).where(Change.type == "Thread", Change.kind == "destroyed")
        ).all()
        moved_root = session.scalar(select(Message.id).where(Message.message_id_header == "root@x"))
        updates = session.scalars(
            select(Change.object_id).where(Change.type == "Email", Change.kind == "updated")
        ).all()
    assert destroyed == [newer]
    assert moved_root in updates


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(min_value=0, max_value=10**6), cuts=st.lists(st.integers(1, 5), max_size=3))
def test_partition_independent_of_order_and_batches(
    seed: int, cuts: list[int], sqlite_template: object, tmp_path_factory: object
) -> None:
    """Any arrival order split into any batches gives the same threads."""
    import shutil
    from pathlib import Path

    assert isinstance(sqlite_template, Path)
    folder = tmp_path_factory.mktemp("order")  # type: ignore[attr-defined]
    path = folder / "s.sqlite3"
    shutil.copy(sqlite_template, path)
    store = open_store(f"sqlite:///{path}", migrate=False)
    try:
        account = make_account(store)
        items = list(CONVERSATIONS)
        random.Random(seed).shuffle(items)
        bounds = sorted(set(cuts))
        start = 0
        for end in [*bounds, len(items)]:
            if items[start:end]:
                ingest(store, account, items[start:end])
            start = end
        assert _partition(store) == EXPECTED
    finally:
        store.dispose()
