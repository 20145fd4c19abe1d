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
