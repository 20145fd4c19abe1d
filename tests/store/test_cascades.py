"""Deleting owners and accounts cascades through every table on both stores."""

from __future__ import annotations

from sqlalchemy import delete, func, select

from mailroom.store.engine import Store
from mailroom.store.models import Account, Message, MessageLabel, Thread, ThreadLabel, User
from tests.factories import make_message
from tests.helpers import ingest, make_account


def _count(store: Store, model: type) -> int:
    with store.session() as session:
        return int(session.scalar(select(func.count()).select_from(model)) or 0)


def test_deleting_a_user_removes_all_their_mail(store: Store) -> None:
    """A user's deletion cascades to accounts, messages, threads and labels; others stay."""
    mine = make_account(store)
    theirs = make_account(store, owner="other", name="o")
    raws = [("a", make_message("a@x")), ("b", make_message("b@x", in_reply_to="a@x"))]
    ingest(store, mine, raws)
    ingest(store, theirs, raws)
    with store.session() as session:
        session.execute(delete(User).where(User.id == mine[0]))
    assert _count(store, Message) == 2 and _count(store, Thread) == 1
    assert _count(store, ThreadLabel) == 1 and _count(store, MessageLabel) == 2
    with store.session() as session:
        (thread,) = session.scalars(select(Thread)).all()
        assert thread.message_count == 2


def test_deleting_an_account_keeps_thread_counters_right(store: Store) -> None:
    """Removing one account's copy of a conversation leaves the other's thread counted."""
    user_id, account_id, inbox = make_account(store)
    with store.session() as session:
        from mailroom.owners import get_or_create_account, get_or_create_user

        second = get_or_create_account(session, get_or_create_user(session), "second", "local").id
    ingest(store, (user_id, account_id, inbox), [("a", make_message("a@x"))])
    ingest(store, (user_id, second, inbox), [("b", make_message("b@x", in_reply_to="a@x"))])
    with store.session() as session:
        session.execute(delete(Account).where(Account.id == second))
    with store.session() as session:
        (thread,) = session.scalars(select(Thread).where(Thread.message_count > 0)).all()
        assert thread.message_count == 1
        assert session.scalars(select(ThreadLabel.message_count)).all() == [1]
