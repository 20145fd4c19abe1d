"""The skipped ledger: chats and 404s recorded once, counted as done, forgotten on request."""

from __future__ import annotations

from datetime import timedelta

import pytest
from alembic import command
from sqlalchemy import func, select

from mailroom.providers.gmail.skipped import (
    CHAT,
    HEADER_LENGTH,
    NOT_FOUND,
    SkippedEntry,
    address_headers,
    forget_skipped,
    list_skipped,
    record_skipped,
    skipped_ids,
)
from mailroom.store.engine import Store
from mailroom.store.migrate import alembic_config
from mailroom.store.models import SkippedMessage
from tests.factories import BASE_TIME
from tests.helpers import make_account

CHAT_ENTRY = SkippedEntry(
    "17c0ffee00000001",
    CHAT,
    "A chat message has no place among mail.",
    ["CHAT", "UNREAD"],
    {"From": "Ann <ann@example.org>", "To": "me@example.org", "Subject": "hi"},
)
GONE_ENTRY = SkippedEntry("17c0ffee00000002", NOT_FOUND, "Gmail listed it but answered 404.")


def test_address_headers_keeps_only_addresses_bounded() -> None:
    """From, To, Cc and Delivered-To are kept (the first of each), cut to 998 characters."""
    headers = [
        {"name": "Subject", "value": "Lunch"},
        {"name": "From", "value": "Ann <ann@example.org>"},
        {"name": "from", "value": "second@example.org"},
        {"name": "To", "value": "x" * 5_000},
        {"name": "Delivered-To", "value": "me@example.org"},
    ]
    assert address_headers(headers) == {
        "from": "Ann <ann@example.org>",
        "to": "x" * HEADER_LENGTH,
        "delivered-to": "me@example.org",
    }


def test_recording_twice_is_one_row_seen_again(store: Store) -> None:
    """The same id recorded again keeps its first sight and moves its last one."""
    _, account_id, _ = make_account(store)
    with store.session() as session:
        record_skipped(session, account_id, [CHAT_ENTRY, GONE_ENTRY], BASE_TIME)
    later = BASE_TIME + timedelta(hours=1)
    again = SkippedEntry(GONE_ENTRY.provider_id, NOT_FOUND, "Still 404.", ["TRASH"])
    with store.session() as session:
        record_skipped(session, account_id, [again, again], later)
    with store.session() as session:
        records = list_skipped(session, [account_id])
        rows = session.scalar(select(func.count()).select_from(SkippedMessage))
    assert rows == 2
    assert [(r.kind, r.provider_id) for r in records] == [
        (CHAT, CHAT_ENTRY.provider_id),
        (NOT_FOUND, GONE_ENTRY.provider_id),
    ]
    chat, gone = records
    assert chat.label_ids == ["CHAT", "UNREAD"]
    assert chat.headers == {"from": "Ann <ann@example.org>", "to": "me@example.org"}
    assert (chat.first_seen, chat.last_seen) == (BASE_TIME, BASE_TIME)
    assert (gone.reason, gone.label_ids) == ("Still 404.", ["TRASH"])
    assert (gone.first_seen, gone.last_seen) == (BASE_TIME, later)


def test_the_listing_counts_recorded_ids_as_done(store: Store) -> None:
    """Of a listed page, exactly the recorded ids of this account are reported."""
    _, account_id, _ = make_account(store)
    _, other_id, _ = make_account(store, name="other")
    with store.session() as session:
        record_skipped(session, account_id, [CHAT_ENTRY], BASE_TIME)
        record_skipped(session, other_id, [GONE_ENTRY], BASE_TIME)
    page = [f"{n:016x}" for n in range(1_200)] + [CHAT_ENTRY.provider_id, GONE_ENTRY.provider_id]
    with store.session() as session:
        assert skipped_ids(session, account_id, page) == {CHAT_ENTRY.provider_id}
        assert skipped_ids(session, other_id, page) == {GONE_ENTRY.provider_id}
        assert skipped_ids(session, account_id, []) == set()


def test_forget_all_or_some(store: Store) -> None:
    """Forgetting named ids removes only them; forgetting all empties only that account."""
    _, account_id, _ = make_account(store)
    _, other_id, _ = make_account(store, name="other")
    with store.session() as session:
        record_skipped(session, account_id, [CHAT_ENTRY, GONE_ENTRY], BASE_TIME)
        record_skipped(session, other_id, [CHAT_ENTRY], BASE_TIME)
    with store.session() as session:
        assert forget_skipped(session, account_id, [GONE_ENTRY.provider_id, "unknown"]) == 1
        assert forget_skipped(session, account_id, []) == 0
    with store.session() as session:
        assert skipped_ids(session, account_id, [GONE_ENTRY.provider_id]) == set()
        assert forget_skipped(session, account_id) == 1
        assert forget_skipped(session, account_id) == 0
    with store.session() as session:
        assert list_skipped(session, [account_id]) == []
        assert [r.account_id for r in list_skipped(session, [other_id])] == [other_id]


def test_an_unknown_kind_is_refused(store: Store) -> None:
    """Only chats and 404s are Gmail's kinds: a typo cannot make a new group."""
    _, account_id, _ = make_account(store)
    with store.session() as session, pytest.raises(ValueError, match="unknown kind"):
        record_skipped(session, account_id, [SkippedEntry("1", "chats", "typo")], BASE_TIME)


def test_migration_0014_gives_old_rows_their_first_sight_as_last(store: Store) -> None:
    """Rows stored before 0014 (the IMAP ledger's) are last seen when they were first seen."""
    _, account_id, _ = make_account(store)
    with store.session() as session:
        record_skipped(session, account_id, [GONE_ENTRY], BASE_TIME)
    config = alembic_config(store)
    command.downgrade(config, "0013")
    command.upgrade(config, "head")
    with store.session() as session:
        (record,) = list_skipped(session, [account_id])
    assert (record.first_seen, record.last_seen) == (BASE_TIME, BASE_TIME)
    assert record.reason == GONE_ENTRY.reason
