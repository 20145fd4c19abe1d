"""Sending through the Gmail API (messages.send), against the emulator, on both stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from mailroom.config import Settings
from mailroom.outbound.transports import transport_for
from mailroom.providers import registry
from mailroom.providers.base import RateLimitError
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.emulators.gmail.emulator import GmailEmulator
from tests.emulators.gmail.seed import make_message
from tests.providers.gmail.test_sync import first_contact, stored
from tests.providers.test_gmail_contract import gmail_account, sync

__all__ = ["gmail_account"]


def send(store: Store, settings: Settings, account_id: int, raw: bytes) -> None:
    """Hand ``raw`` to the account's transport, as a lane job does."""
    with store.session() as session:
        account = session.get(Account, account_id)
        assert account is not None
        transport = transport_for(session, account, settings)
    try:
        result = transport.send("owner@example.com", ["bob@example.org"], raw, message_id="<x>")
        assert set(result.accepted) == {"bob@example.org"}
    finally:
        transport.close()


def test_gmail_files_its_own_sent_copy() -> None:
    """The entry says so, so mailroom stores and appends no Sent copy of its own."""
    assert registry.files_sent_mail("gmail")


def test_a_reply_is_sent_into_the_gmail_thread_it_answers(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """messages.send gets the raw MIME and the threadId of the stored message replied to."""
    original = gmail_emulator.add_message(
        make_message("Lunch?", sender="bob@example.org", message_id="<lunch@example.org>")
    )
    first_contact(store, settings, gmail_account)
    reply = make_message(
        "Re: Lunch?",
        "Yes.",
        sender="owner@example.com",
        to="bob@example.org",
        message_id="<yes@example.com>",
        in_reply_to="<lunch@example.org>",
    )
    send(store, settings, gmail_account, reply)
    (call,) = gmail_emulator.calls("messages.send")
    sent = [m for m in gmail_emulator.mailbox.messages.values() if m.id != original]
    assert len(sent) == 1 and b"Yes." in sent[0].raw and "SENT" in sent[0].labels
    assert sent[0].thread_id == gmail_emulator.message(original).thread_id
    sync(store, settings, gmail_account)  # Gmail's Sent copy arrives with the next sync
    mine = stored(store, gmail_account)
    assert "Sent" in mine[sent[0].id].labels
    assert mine[sent[0].id].thread_id == mine[original].thread_id
    assert call.status == 200


def test_a_new_message_starts_its_own_thread(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """Without In-Reply-To no threadId is sent: Gmail starts a thread."""
    first_contact(store, settings, gmail_account)
    send(store, settings, gmail_account, make_message("Hello", message_id="<hello@example.com>"))
    (sent,) = gmail_emulator.mailbox.messages.values()
    assert sent.thread_id and "SENT" in sent.labels


def test_gmails_sending_limit_is_a_rate_limit_with_the_wait(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, gmail_account: int
) -> None:
    """Gmail's 429 "Retry after <time>" is a RateLimitError saying how long to wait."""
    gmail_emulator.block_sending(datetime.now(UTC) + timedelta(minutes=10))
    with pytest.raises(RateLimitError) as info:
        send(store, settings, gmail_account, make_message("Hi", message_id="<hi@example.com>"))
    assert info.value.retry_after is not None and info.value.retry_after > 60
    assert gmail_emulator.mailbox.messages == {}
