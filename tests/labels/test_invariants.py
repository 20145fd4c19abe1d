"""Random operation sequences never break the label invariants."""

from __future__ import annotations

import itertools
from collections import defaultdict
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from mailroom.labels.operations import LOCATION_ROLES, Operations
from mailroom.labels.resolver import resolve_path
from mailroom.store.engine import Store
from mailroom.store.models import Label, Message, MessageLabel, Thread, ThreadLabel
from tests.factories import make_message
from tests.helpers import ingest, make_account

OPERATIONS = [
    "archive",
    "inbox",
    "trash",
    "restore",
    "spam",
    "unspam",
    "star",
    "unstar",
    "read",
    "unread",
    "label",
    "unlabel",
    "snooze",
    "wake",
]
_users = itertools.count()


def _apply(ops: Operations, name: str, ids: list[int], threads: list[int], work: int) -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    actions = {
        "archive": lambda: ops.archive(ids),
        "inbox": lambda: ops.move_to_inbox(ids),
        "trash": lambda: ops.trash(ids),
        "restore": lambda: ops.restore(ids),
        "spam": lambda: ops.spam(ids),
        "unspam": lambda: ops.spam(ids, is_spam=False),
        "star": lambda: ops.star(ids),
        "unstar": lambda: ops.star(ids, starred=False),
        "read": lambda: ops.mark_read(ids),
        "unread": lambda: ops.mark_read(ids, read=False),
        "label": lambda: ops.label(ids, work),
        "unlabel": lambda: ops.label(ids, work, on=False),
        "snooze": lambda: ops.snooze(threads, now + timedelta(days=1)),
        "wake": lambda: ops.wake(threads),
    }
    actions[name]()


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(OPERATIONS), st.sets(st.integers(0, 2), min_size=1)),
        min_size=1,
        max_size=12,
    )
)
def test_every_message_keeps_a_location_and_threads_stay_consistent(
    store: Store, steps: list[tuple[str, set[int]]]
) -> None:
    """After any sequence: a location per message; union, counters and binned flag agree."""
    account = make_account(store, owner=f"u{next(_users)}")
    user = account[0]
    raws = [
        ("r", make_message("r@x")),
        ("s", make_message("s@x", in_reply_to="r@x")),
        ("t", make_message("t@x")),
    ]
    created = sorted(ingest(store, account, raws).created_ids)
    for name, picks in steps:
        with store.session() as session:
            ops = Operations(session, user)
            work = resolve_path(session, user, ["Work"]).id
            ids = [created[i] for i in sorted(picks)]
            threads = sorted(
                set(session.scalars(select(Message.thread_id).where(Message.id.in_(ids))).all())
            )
            _apply(ops, name, ids, [t for t in threads if t is not None], work)
    with store.session() as session:
        roles = dict(
            session.execute(select(Label.id, Label.role).where(Label.user_id == user)).all()
        )
        locations = {lid for lid, role in roles.items() if role in LOCATION_ROLES}
        labels: dict[int, set[int]] = defaultdict(set)
        for mid, lid in session.execute(
            select(MessageLabel.message_id, MessageLabel.label_id).where(
                MessageLabel.message_id.in_(created)
            )
        ):
            labels[mid].add(lid)
        for mid in created:
            assert labels[mid] & locations, f"message {mid} has no location"
        for thread in session.scalars(select(Thread).where(Thread.user_id == user)):
            members = session.execute(
                select(Message.id, Message.seen_at).where(Message.thread_id == thread.id)
            ).all()
            expected: dict[int, int] = defaultdict(int)
            for mid, _seen in members:
                for lid in labels[mid]:
                    expected[lid] += 1
            stored = dict(
                session.execute(
                    select(ThreadLabel.label_id, ThreadLabel.message_count).where(
                        ThreadLabel.thread_id == thread.id
                    )
                ).all()
            )
            assert stored == dict(expected)
            assert thread.message_count == len(members)
            assert thread.unread_count == sum(1 for _, seen in members if seen is None)
            trash = next(lid for lid, role in roles.items() if role == "trash")
            assert thread.in_trash == (bool(members) and expected.get(trash, 0) == len(members))
