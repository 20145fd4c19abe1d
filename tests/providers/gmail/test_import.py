"""The Gmail backfill's own state: order, interruptions, attempts (emulator, both stores)."""

from __future__ import annotations

import pytest

from mailroom.config import Settings
from mailroom.providers import registry
from mailroom.providers.base import TransientError
from mailroom.providers.gmail.backfill import FINISHED, INBOX, MAILBOX, load_backfill
from mailroom.store.engine import Store
from tests.emulators.gmail.emulator import GmailEmulator
from tests.providers.gmail.test_sync import deliver, stored, the_minute_passes
from tests.providers.test_gmail_contract import gmail_account, import_all, sync

__all__ = ["gmail_account"]


def test_the_inbox_comes_first_then_the_whole_mailbox_with_spam_and_trash(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """The first page stores only the Inbox; the next ones archive, spam and trash too."""
    inbox = deliver(gmail_emulator, "inbox")
    archived = deliver(gmail_emulator, "archived", [])
    spam = deliver(gmail_emulator, "spam", ["SPAM"])
    trashed = deliver(gmail_emulator, "trashed", ["TRASH"])
    sync(store, settings, gmail_account)
    importer = registry.importer_for(store, "gmail", settings)
    assert importer is not None
    assert importer.import_page(gmail_account)
    assert sorted(stored(store, gmail_account)) == [inbox]
    with store.session() as session:
        assert load_backfill(session, gmail_account).phase == MAILBOX
    assert importer.state(gmail_account).importing
    import_all(store, settings, gmail_account)
    mine = stored(store, gmail_account)
    assert sorted(mine) == sorted([inbox, archived, spam, trashed])
    assert mine[archived].labels == {"Archive"} and mine[spam].labels == {"Spam"}
    assert mine[trashed].labels == {"Trash"}
    assert not importer.state(gmail_account).importing


def test_a_page_broken_off_midway_is_done_again_without_doubles(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """A failure inside a page costs an attempt and an hour; the page again stores the rest."""
    ids = [deliver(gmail_emulator, f"m{i}") for i in range(12)]
    sync(store, settings, gmail_account)
    gmail_emulator.inject_faults(1, 500, in_batch=True)
    with pytest.raises(TransientError):
        import_all(store, settings, gmail_account)
    with store.session() as session:
        state = load_backfill(session, gmail_account)
    assert state.phase == INBOX and state.attempts == 1 and state.not_before is not None
    assert 0 < len(stored(store, gmail_account)) < 12
    assert not registry.importer_for(store, "gmail", settings).import_page(gmail_account)  # type: ignore[union-attr]
    the_minute_passes(store, gmail_account)  # and the hour of cooldown is over too
    gmail_emulator.clear_log()
    import_all(store, settings, gmail_account)
    assert sorted(stored(store, gmail_account)) == sorted(ids)
    refetched = [e.path.rsplit("/", 1)[-1] for e in gmail_emulator.calls("messages.get")]
    assert len(refetched) == len(set(refetched)) and len(refetched) < 12
    with store.session() as session:
        assert load_backfill(session, gmail_account).phase == FINISHED
