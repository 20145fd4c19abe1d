"""The skipped ledger of a sealing owner: no address in clear, read the same as a clear owner's.

Two owners of one store (both kinds) connect a Gmail account on the same emulated
mailbox (real HTTP) holding two chats and an id that answers 404: one while the
store writes mail clear, one while it seals. ``mailroom gmail skipped`` must print
the same for both; the sealed owner's raw ``skipped_messages`` rows, and the store's
file (a ``pg_dump`` on PostgreSQL), must hold none of the chats' addresses; an owner
key rotation re-seals the rows, and deleting the owner deletes them.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from click.testing import Result
from sqlalchemy import select, text, update

from mailroom.config import Settings
from mailroom.crypto.datakeys import OwnerKeys
from mailroom.crypto.fields import from_text, version_of
from mailroom.crypto.owner_rotation import Rotator, start_rotation
from mailroom.crypto.sealing import MailSealing, sealing_from_settings
from mailroom.crypto.shredding import delete_owner
from mailroom.providers.gmail.skipped import (
    CHAT,
    SkippedEntry,
    SkippedRecord,
    list_skipped,
    record_skipped,
)
from mailroom.store.engine import Store
from mailroom.store.models import Account, SkippedMessage
from tests.cli.test_gmail_skipped import invoke
from tests.emulators.gmail.emulator import GmailEmulator
from tests.factories import BASE_TIME
from tests.helpers import make_account, store_bytes
from tests.providers.gmail.test_sync import first_contact
from tests.providers.test_gmail_contract import add_gmail_account

HOST = "chat-secret.example"
FROM = f"Walrus Sender <walrus.sender@{HOST}>"
TO = f"tusk.reader@{HOST}"
CC = f"Carol Cc <carol.cc@{HOST}>"
# What no raw ledger row of the sealing owner, and no byte of the store, may hold.
SECRETS = (HOST, "walrus.sender", "tusk.reader", "carol.cc", "Walrus Sender", "Carol Cc")
SEALED_OWNER, CLEAR_OWNER = "selma", "clara"
_SEALED = re.compile(r"mrf1\.[A-Za-z0-9_=-]+")


def chat(words: str, *, cc: bool = False) -> bytes:
    """A Hangouts chat between people of the secret host (a Cc on one of them)."""
    copy = f"Cc: {CC}\r\n" if cc else ""
    return (
        f"Delivered-To: {TO}\r\nFrom: {FROM}\r\nTo: {TO}\r\n{copy}Subject: Chat\r\n"
        f"Content-Type: text/plain; charset=UTF-8\r\n\r\n{words}\r\n"
    ).encode()


@pytest.fixture
def sealing(store: Store, settings: Settings) -> MailSealing:
    """The store's sealing under the settings' master key (which the CLI reads from the
    environment too); the tests switch whether new mail is sealed."""
    found = sealing_from_settings(settings)
    assert found is not None
    store.sealing = found
    return found


def _connect(
    store: Store, settings: Settings, gmail: GmailEmulator, sealing: MailSealing, owner: str
) -> int:
    """``owner``'s Gmail account on the mailbox, imported while mail is sealed (or clear)."""
    store.sealing = replace(sealing, seal_new_mail=owner == SEALED_OWNER)
    account = add_gmail_account(store, settings, gmail, owner=owner, name="gmail")
    first_contact(store, settings, account)
    return account


def raw_rows(store: Store, account: int) -> list[str]:
    """Every raw ledger row of the account, as text."""
    with store.session() as session:
        rows = session.execute(
            text("SELECT * FROM skipped_messages WHERE account_id = :a"), {"a": account}
        )
        return [" ".join(map(str, row)) for row in rows]


def _secrets_in(texts: list[str]) -> set[str]:
    joined = " ".join(texts)
    return {secret for secret in SECRETS if secret in joined}


def _listing(store: Store, account: int) -> list[SkippedRecord]:
    with store.session() as session:
        return list_skipped(session, [account])


def _without_account(records: list[SkippedRecord]) -> list[SkippedRecord]:
    return [replace(record, account_id=0) for record in records]


def _cli(store: Store, owner: str) -> tuple[str, str]:
    """``mailroom gmail skipped`` of the owner: the table and the JSON."""
    results: list[Result] = [
        invoke(store, "gmail", "skipped", "--owner", owner),
        invoke(store, "gmail", "skipped", "--owner", owner, "--format", "json"),
    ]
    for result in results:
        assert result.exit_code == 0, result.output
    return results[0].output, results[1].output


def test_a_sealing_owner_s_ledger_holds_no_address_and_lists_as_a_clear_one_s(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator, sealing: MailSealing
) -> None:
    """Same listing (in-process and CLI), sealed rows and file; rotation; owner deletion."""
    chats = [
        gmail_emulator.add_message(chat("see you", cc=True), ["CHAT"]),
        gmail_emulator.add_message(chat("on my way"), ["CHAT", "UNREAD"]),
    ]
    gone = gmail_emulator.add_unfetchable(["INBOX"])

    sealed = _connect(store, settings, gmail_emulator, sealing, SEALED_OWNER)
    assert _secrets_in([store_bytes(store).decode("latin-1")]) == set()  # nothing else yet
    clear = _connect(store, settings, gmail_emulator, sealing, CLEAR_OWNER)
    assert _secrets_in([store_bytes(store).decode("latin-1")]) == set(SECRETS)  # the baseline
    with store.session() as session:  # the two imports ran at different moments
        session.execute(update(SkippedMessage).values(created_at=BASE_TIME, last_seen_at=BASE_TIME))

    # The raw rows: the clear owner's name the chats' people, the sealed owner's nobody.
    clear_rows, sealed_rows = raw_rows(store, clear), raw_rows(store, sealed)
    assert len(clear_rows) == len(sealed_rows) == 3
    assert _secrets_in(clear_rows) == set(SECRETS)
    assert _secrets_in(sealed_rows) == set()
    assert "answered 404" in " ".join(clear_rows) and "answered 404" not in " ".join(sealed_rows)
    assert all(len(_SEALED.findall(row)) == 2 for row in sealed_rows)  # headers and reason
    assert not any(_SEALED.search(row) for row in clear_rows)

    # What readers see is the same for both owners, and what it should be.
    listed = _listing(store, sealed)
    assert _without_account(listed) == _without_account(_listing(store, clear))
    by_id = {record.provider_id: record for record in listed}
    assert set(by_id) == {*chats, gone}
    assert by_id[chats[0]].kind == CHAT
    assert by_id[chats[0]].headers == {"from": FROM, "to": TO, "cc": CC, "delivered-to": TO}
    assert by_id[chats[1]].label_ids == ["CHAT", "UNREAD"]
    assert by_id[gone].headers == {} and "answered 404" in by_id[gone].reason
    table, as_json = _cli(store, SEALED_OWNER)
    assert (table, as_json) == _cli(store, CLEAR_OWNER)
    assert "Walrus Sender" in table and "mrf1." not in table + as_json
    assert {row["id"]: row["headers"] for row in json.loads(as_json)}[chats[0]]["cc"] == CC

    # A key rotation re-seals every value under the new version; the listing reads on.
    with store.session() as session:
        owner = session.scalars(select(Account.user_id).where(Account.id == sealed)).one()
        rotation = start_rotation(session, OwnerKeys(session, sealing.wrapper), owner).id
    Rotator(store, sealing.wrapper, batch=1).run(rotation)
    tokens = [t for row in raw_rows(store, sealed) for t in _SEALED.findall(row)]
    assert len(tokens) == 6 and {version_of(from_text(t)) for t in tokens} == {2}
    assert _listing(store, sealed) == listed
    assert _cli(store, SEALED_OWNER) == (table, as_json)

    # Deleting the sealing owner deletes their ledger; the clear owner's stays.
    delete_owner(store, SEALED_OWNER)
    assert raw_rows(store, sealed) == [] and len(raw_rows(store, clear)) == 3


def test_recording_again_seals_the_new_values_of_the_same_row(
    store: Store, settings: Settings, sealing: MailSealing
) -> None:
    """The upsert's update path: a chat seen again is one row, sealed with what it says now."""
    store.sealing = replace(sealing, seal_new_mail=True)
    _, account, _ = make_account(store, SEALED_OWNER)
    first = SkippedEntry("17c0ffee00000001", CHAT, "a chat", ["CHAT"], {"From": FROM})
    again = SkippedEntry("17c0ffee00000001", CHAT, "a chat seen again", ["CHAT"], {"Cc": CC})
    with store.session() as session:
        record_skipped(session, account, [first], BASE_TIME)
    with store.session() as session:
        record_skipped(session, account, [again], BASE_TIME)
    (record,) = _listing(store, account)
    assert (record.reason, record.headers) == ("a chat seen again", {"cc": CC})
    (row,) = raw_rows(store, account)
    assert _secrets_in([row]) == set() and "seen again" not in row
    store.sealing = replace(sealing, seal_new_mail=False)  # sealed rows open while it is off
    assert _listing(store, account) == [record]
