"""Carrying mailroom's operations to Gmail, against the emulator, on both stores.

The operations are the ones the web app and JMAP call (``labels.operations``);
the consumer is the one the jobs run (``propagate_pending``). What Gmail holds
afterwards, and which calls reached it, are read from the emulator.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import select

from mailroom.config import Settings
from mailroom.labels.lifecycle import LabelLifecycle
from mailroom.labels.operations import Operations
from mailroom.labels.propagation import PropagationRun, propagate_pending
from mailroom.providers import registry
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.emulators.gmail.emulator import GmailEmulator
from tests.providers.gmail.test_sync import deliver, first_contact, stored
from tests.providers.test_gmail_contract import gmail_account, sync

__all__ = ["gmail_account"]


def operate(store: Store, account_id: int, change: Callable[[Operations], object]) -> None:
    """Run an operation as the owner of the account."""
    with store.session() as session:
        user_id = session.scalars(select(Account.user_id).where(Account.id == account_id)).one()
        change(Operations(session, user_id))


def propagate(store: Store, settings: Settings, account_id: int) -> PropagationRun:
    """Carry the account's due pending changes through the registered propagator."""
    propagator = registry.propagator_for(store, "gmail", settings)
    assert propagator is not None
    return propagate_pending(store, account_id, propagator)


def test_changes_with_the_same_labels_share_one_batch_modify(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """Two messages starred alike go in one batchModify; an archived one in another."""
    a, b, c = (deliver(gmail_emulator, key) for key in "abc")
    first_contact(store, settings, gmail_account)
    ids = stored(store, gmail_account)
    operate(store, gmail_account, lambda ops: ops.star([ids[a].id, ids[b].id]))
    operate(store, gmail_account, lambda ops: ops.archive([ids[c].id]))
    gmail_emulator.clear_log()
    run = propagate(store, settings, gmail_account)
    assert run.failed == 0 and run.retried == 0 and run.done == 3
    calls = gmail_emulator.calls("messages.batchModify")
    assert len(calls) == 2
    assert {"STARRED", "INBOX", "UNREAD"} <= gmail_emulator.label_ids(a)
    assert gmail_emulator.label_ids(a) == gmail_emulator.label_ids(b)
    assert "INBOX" not in gmail_emulator.label_ids(c)
    sync(store, settings, gmail_account)  # Gmail's echo changes nothing back
    assert stored(store, gmail_account)[c].labels == {"Archive"}
    assert "Starred" in stored(store, gmail_account)[a].labels


def test_trash_and_restore_use_gmails_trash_calls(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """Trash is messages.trash, restoring it messages.untrash; the sync then agrees."""
    a = deliver(gmail_emulator, "a")
    first_contact(store, settings, gmail_account)
    message_id = stored(store, gmail_account)[a].id
    operate(store, gmail_account, lambda ops: ops.trash([message_id]))
    assert propagate(store, settings, gmail_account).failed == 0
    assert "TRASH" in gmail_emulator.label_ids(a) and gmail_emulator.calls("messages.trash")
    sync(store, settings, gmail_account)
    assert "Trash" in stored(store, gmail_account)[a].labels
    operate(store, gmail_account, lambda ops: ops.restore([message_id]))
    assert propagate(store, settings, gmail_account).failed == 0
    assert "TRASH" not in gmail_emulator.label_ids(a) and gmail_emulator.calls("messages.untrash")
    sync(store, settings, gmail_account)
    assert "Trash" not in stored(store, gmail_account)[a].labels


def test_a_label_made_in_mailroom_is_created_and_applied_in_gmail(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """A new label reaches Gmail as labels.create, labelling a message as batchModify."""
    a = deliver(gmail_emulator, "a")
    first_contact(store, settings, gmail_account)
    message_id = stored(store, gmail_account)[a].id
    with store.session() as session:
        user_id = session.scalars(select(Account.user_id).where(Account.id == gmail_account)).one()
        label_id = LabelLifecycle(session, user_id).create("Receipts").id
    assert propagate(store, settings, gmail_account).failed == 0
    (gmail_label,) = [i for i, n in gmail_emulator.label_names().items() if n == "Receipts"]
    operate(store, gmail_account, lambda ops: ops.label([message_id], label_id))
    assert propagate(store, settings, gmail_account).failed == 0
    assert gmail_label in gmail_emulator.label_ids(a)
    sync(store, settings, gmail_account)
    assert stored(store, gmail_account)[a].labels == {"Inbox", "Receipts"}


def test_deleting_forever_deletes_in_gmail(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """A message deleted forever in mailroom is messages.delete-d; a replay is harmless."""
    a, b = deliver(gmail_emulator, "a"), deliver(gmail_emulator, "b")
    first_contact(store, settings, gmail_account)
    message_id = stored(store, gmail_account)[a].id
    operate(store, gmail_account, lambda ops: ops.delete_forever([message_id]))
    assert propagate(store, settings, gmail_account).failed == 0
    assert a not in gmail_emulator.mailbox.messages and b in gmail_emulator.mailbox.messages
    sync(store, settings, gmail_account)
    assert sorted(stored(store, gmail_account)) == [b]
