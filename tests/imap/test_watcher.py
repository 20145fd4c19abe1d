"""The IDLE watcher: new mail is stored without a poll; IDLE is renewed; stop is clean."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.providers.imap import ImapWatcher
from mailroom.providers.imap.syncer import sync_account
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.factories import make_message
from tests.imap.views import Mailbox, message_ids


@contextmanager
def watching(watcher: ImapWatcher) -> Iterator[list[BaseException]]:
    """Run the watcher in a thread; stop it and join on the way out."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            watcher.run()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    try:
        assert watcher.running.wait(10), errors
        yield errors
    finally:
        watcher.stop()
        thread.join(10)
        assert not thread.is_alive(), "the watcher did not stop"


def _wait_for(predicate: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


def _watch_state(store: Store, account: int) -> str:
    with store.session() as session:
        return session.scalars(select(Account.watch_state).where(Account.id == account)).one()


def test_new_mail_is_stored_while_idling(
    store: Store, settings: Settings, mailbox: Mailbox, account: int
) -> None:
    """Mail delivered while the watcher idles is in the store within seconds; stop is clean."""
    sync_account(store, account, settings=settings)
    watcher = ImapWatcher(store, account, settings=settings, poll_interval=0.2)
    with watching(watcher) as errors:
        assert _watch_state(store, account) == "watching"
        mailbox.append("INBOX", make_message("pushed@x", subject="Pushed"))
        assert _wait_for(lambda: "pushed@x" in message_ids(store, account)), errors
        mailbox.server.deliver(mailbox.user, make_message("delivered@x"))
        assert _wait_for(lambda: "delivered@x" in message_ids(store, account)), errors
    assert not errors
    assert _watch_state(store, account) == "idle"


def test_idle_is_reissued_and_still_sees_mail(
    store: Store, settings: Settings, mailbox: Mailbox, account: int
) -> None:
    """With a short renewal the watcher re-issues IDLE and keeps noticing new mail."""
    watcher = ImapWatcher(store, account, settings=settings, renew_after=0.5, poll_interval=0.1)
    with watching(watcher) as errors:
        assert _wait_for(lambda: watcher.idles >= 3), errors
        mailbox.append("INBOX", make_message("later@x"))
        assert _wait_for(lambda: "later@x" in message_ids(store, account)), errors
    assert not errors


def test_renewal_must_stay_under_29_minutes(store: Store, account: int) -> None:
    """A renewal interval of 29 minutes or more is refused (RFC 2177)."""
    with pytest.raises(ConfigError):
        ImapWatcher(store, account, renew_after=29 * 60)


def test_a_dropped_connection_ends_the_watch_with_a_transient_error(
    store: Store, settings: Settings, mailbox: Mailbox, account: int
) -> None:
    """When the server connection drops during IDLE, run() raises TransientError; state idle."""
    from mailroom.providers.base import TransientError
    from tests.support.tcpproxy import FaultyProxy

    sync_account(store, account, settings=settings)
    with FaultyProxy(mailbox.server.host, mailbox.server.port) as proxy:
        with store.session() as session:
            row = session.get(Account, account)
            assert row is not None
            row.settings = {**row.settings, "port": proxy.port}
        watcher = ImapWatcher(store, account, settings=settings, poll_interval=0.1)
        with watching(watcher) as errors:
            assert _wait_for(lambda: watcher.idles >= 1), errors
            proxy.drop_all()
            assert _wait_for(lambda: bool(errors)), "the watcher did not notice the drop"
        assert isinstance(errors[0], TransientError)
    assert _watch_state(store, account) == "idle"


def test_import_stalled_after_five_silent_minutes(
    store: Store, settings: Settings, mailbox: Mailbox, account: int
) -> None:
    """An import with work left and no page for 5 minutes is reported stalled; a done one is not."""
    from datetime import timedelta

    from mailroom.providers.imap import import_page, import_stalled
    from mailroom.store.models import utcnow

    for i in range(60):
        mailbox.append("INBOX", make_message(f"s-{i}@x"))
    sync_account(store, account, settings=settings)
    assert import_stalled(store, account)  # work left, no page yet
    assert import_page(store, account, settings=settings)
    assert not import_stalled(store, account)
    assert import_stalled(store, account, now=utcnow() + timedelta(minutes=6))
    while import_page(store, account, settings=settings):
        pass
    assert not import_stalled(store, account, now=utcnow() + timedelta(minutes=6))
