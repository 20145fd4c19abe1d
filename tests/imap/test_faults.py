"""A connection dropped mid-FETCH (fault-injecting proxy) loses nothing and duplicates nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.providers.base import TransientError
from mailroom.providers.imap import import_page, import_state, sync_account
from mailroom.store.engine import Store
from mailroom.store.models import Account, SkippedMessage
from tests.factories import make_message
from tests.imap.views import Mailbox, assert_mirrors, message_ids
from tests.support.tcpproxy import FaultyProxy


@pytest.fixture
def proxy(mailbox: Mailbox) -> Iterator[FaultyProxy]:
    """A fault-injecting proxy in front of the test's Dovecot."""
    with FaultyProxy(mailbox.server.host, mailbox.server.port) as faulty:
        yield faulty


@pytest.fixture
def proxied(store: Store, account: int, proxy: FaultyProxy) -> int:
    """The test's account, reaching the server through the proxy."""
    with store.session() as session:
        acct = session.get(Account, account)
        assert acct is not None
        acct.settings = {**acct.settings, "port": proxy.port}
    return account


def test_drop_mid_fetch_during_import_then_resume(
    store: Store, settings: Settings, mailbox: Mailbox, proxied: int, proxy: FaultyProxy
) -> None:
    """An import page cut mid-FETCH raises TransientError; the retry completes it exactly once."""
    body = "".join(f"line {i:05d} of a longer body\n" for i in range(400))
    with mailbox.client() as other:
        for i in range(70):
            other.append("INBOX", make_message(f"m-{i}@x", body=body))
    sync_account(store, proxied, settings=settings)
    proxy.drop_after(30_000)  # well into the first page's bodies
    with pytest.raises(TransientError):
        import_page(store, proxied, settings=settings)
    assert proxy.connections_dropped == 1
    assert message_ids(store, proxied) == {}
    proxy.reset()
    while import_page(store, proxied, settings=settings):
        pass
    assert len(message_ids(store, proxied)) == 70
    with store.session() as session:
        assert session.scalars(select(SkippedMessage)).all() == []
        assert not import_state(session, proxied).importing
    assert_mirrors(store, proxied, mailbox)


def test_drop_mid_fetch_during_sync_then_resume(
    store: Store, settings: Settings, mailbox: Mailbox, proxied: int, proxy: FaultyProxy
) -> None:
    """New mail whose fetch is cut is fetched again by the next sync, and stored once."""
    sync_account(store, proxied, settings=settings)
    body = "y" * 20_000 + "\n"
    with mailbox.client() as other:
        for i in range(5):
            other.append("INBOX", make_message(f"n-{i}@x", body=body))
    # Cut every connection a few KB into the answers, several times in a row.
    for _ in range(3):
        proxy.drop_after(8_000)
        with pytest.raises(TransientError):
            sync_account(store, proxied, settings=settings)
    proxy.reset()
    sync_account(store, proxied, settings=settings)
    assert len(message_ids(store, proxied)) == 5
    with store.session() as session:
        assert session.scalars(select(SkippedMessage)).all() == []
    assert_mirrors(store, proxied, mailbox)


def test_drop_during_look_ahead_then_resume(
    store: Store, settings: Settings, mailbox: Mailbox, proxied: int, proxy: FaultyProxy
) -> None:
    """A connection cut during the look-ahead fails a later call; nothing is lost or doubled."""
    from mailroom.providers.imap.login import account_connection

    body = "z" * 3_000 + "\n"
    with mailbox.client() as other:
        for i in range(150):
            other.append("INBOX", make_message(f"la-{i}@x", body=body))
    with account_connection(store, proxied, settings=settings) as conn:
        sync_account(store, proxied, settings=settings, connection=conn)
        proxy.drop_after(200_000)  # inside the look-ahead of the second page
        calls = 0
        more = True
        while more:
            calls += 1
            assert calls < 30, "the import does not recover"
            if calls == 6:
                proxy.reset()
            try:  # a closed connection is replaced by a new one on the next call
                more = import_page(store, proxied, settings=settings, connection=conn)
            except TransientError:
                continue
    assert proxy.connections_dropped >= 1
    assert len(message_ids(store, proxied)) == 150
    assert_mirrors(store, proxied, mailbox)
