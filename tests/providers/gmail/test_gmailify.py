"""Gmailify: a Gmail account fetching a sibling's mail, with the sibling connected over IMAP.

The Gmail account is the emulator's mailbox, the sibling a real Dovecot user; both
belong to one owner. Each test runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from sqlalchemy import delete, func, select

from mailroom.config import Settings
from mailroom.providers import registry
from mailroom.providers.gmail.gmailify import Sibling, claimant, delivery_addresses
from mailroom.providers.gmail.skipped import LINKED, list_skipped
from mailroom.rules import add_rule, parse_rule
from mailroom.store.engine import Store
from mailroom.store.models import (
    Account,
    Change,
    Label,
    Message,
    MessageLabel,
    MessageLocation,
)
from tests.emulators.gmail.emulator import GmailEmulator
from tests.emulators.gmail.seed import make_message
from tests.imap.conftest import add_account, new_mailbox
from tests.imap.views import Mailbox
from tests.providers.test_gmail_contract import gmail_account, import_all, sync
from tests.support.dovecot import DovecotServer

__all__ = ["gmail_account"]

SIBLING = "sib@example.net"
OWNER = "owner@example.com"  # the emulator's mailbox


def original(key: str, *, sender: str = "alice@example.org", to: str = SIBLING) -> bytes:
    """A message as the sibling's server delivered it (its own delivery headers on top)."""
    body = make_message(f"About {key}", sender=sender, to=to, message_id=f"<{key}@example.org>")
    return (
        f"Delivered-To: {to}\r\nReceived: from mx.example.org by imap.example.net "
        f"with ESMTP id {key}\r\n\tfor <{to}>; Mon, 5 Jan 2026 09:00:00 +0000\r\n"
    ).encode() + body


def fetched_by_gmail(raw: bytes) -> bytes:
    """The same message as Gmail holds it after fetching it: Gmail's own hop added on top."""
    return (
        f"Delivered-To: {OWNER}\r\nReceived: by 2002:a05:6000:1 with POP3 id x\r\n"
        f"\tfor <{OWNER}>; Mon, 5 Jan 2026 09:01:00 +0000\r\n"
    ).encode() + raw


@pytest.fixture
def sibling_box(dovecot: DovecotServer) -> Mailbox:
    """A fresh Dovecot user: the sibling's own mailbox."""
    return new_mailbox(dovecot)


@pytest.fixture
def sibling(store: Store, settings: Settings, sibling_box: Mailbox, gmail_account: int) -> int:
    """The owner's IMAP account for the sibling address (connected after the Gmail one)."""
    account_id = add_account(store, settings, sibling_box, name="sibling")
    with store.session() as session:
        account = session.get(Account, account_id)
        assert account is not None
        account.settings = {**account.settings, "email": SIBLING}
    return account_id


@dataclass
class Linked:
    """The owner's Gmail account and its IMAP sibling, and a rule: mail from alice gets
    the label Ruled."""

    store: Store
    settings: Settings
    gmail: GmailEmulator
    gmail_account: int
    sibling: int
    box: Mailbox


@pytest.fixture
def linked(
    store: Store,
    settings: Settings,
    gmail_emulator: GmailEmulator,
    gmail_account: int,
    sibling: int,
    sibling_box: Mailbox,
) -> Linked:
    """Both accounts of one owner, and the owner's rule."""
    with store.session() as session:
        user_id = session.scalars(select(Account.user_id).where(Account.id == gmail_account)).one()
        add_rule(
            session,
            user_id,
            parse_rule("alice", {"from": "alice"}, [{"type": "label", "label": "Ruled"}]),
        )
    return Linked(store, settings, gmail_emulator, gmail_account, sibling, sibling_box)


def fetch_imap(store: Store, settings: Settings, account_id: int) -> None:
    """A sync of the IMAP account, then its import to the end."""
    syncer = registry.syncer_for(store, "imap", settings)
    importer = registry.importer_for(store, "imap", settings)
    assert syncer is not None and importer is not None
    syncer.sync(account_id)
    for _page in range(100):
        if not importer.import_page(account_id):
            return
    raise AssertionError("the IMAP import does not end")


def fetch_gmail(store: Store, settings: Settings, account_id: int) -> None:
    """A sync of the Gmail account, then its backfill to the end."""
    sync(store, settings, account_id)
    import_all(store, settings, account_id)


def rows(store: Store, key: str) -> list[tuple[int, int]]:
    """(message id, account id) of every stored row with this Message-ID."""
    with store.session() as session:
        found = session.execute(
            select(Message.id, Message.account_id).where(
                Message.message_id_header == f"{key}@example.org"
            )
        ).all()
    return [(int(m), int(a)) for m, a in found]


def labels_of(store: Store, message_id: int) -> set[str]:
    """The label paths of a stored message."""
    with store.session() as session:
        return set(
            session.scalars(
                select(Label.path)
                .join(MessageLabel, MessageLabel.label_id == Label.id)
                .where(MessageLabel.message_id == message_id)
            )
        )


def unlabel(store: Store, message_id: int, path: str) -> None:
    """The owner takes a label off a message by hand."""
    with store.session() as session:
        label = session.scalars(select(Label.id).where(Label.path == path)).one()
        session.execute(
            delete(MessageLabel).where(
                MessageLabel.message_id == message_id, MessageLabel.label_id == label
            )
        )


def created(store: Store, message_id: int) -> int:
    """How often JMAP was told this Email was created."""
    with store.session() as session:
        return int(
            session.scalar(
                select(func.count()).where(
                    Change.type == "Email", Change.object_id == message_id, Change.kind == "created"
                )
            )
            or 0
        )


def linked_ids(store: Store, account_id: int) -> set[str]:
    """The Gmail ids the account's ledger says a linked account holds."""
    with store.session() as session:
        return {r.provider_id for r in list_skipped(session, [account_id]) if r.kind == LINKED}


def test_the_topmost_sibling_named_in_delivery_headers_has_the_claim() -> None:
    """Delivered-To, X-Original-To, Envelope-To and Received's "for" count, top first; To does
    not, and an address no sibling owns gives no claim."""
    headers = [
        ("Delivered-To", OWNER),
        ("Received", "from a by b\r\n\tfor <Other@Example.NET>; Mon, 5 Jan 2026 09:00:00 +0000"),
        ("X-Original-To", SIBLING),
        ("To", "third@example.org"),
    ]
    assert delivery_addresses(headers) == [OWNER, "other@example.net", SIBLING]
    sib = Sibling(2, "sibling", "imap", frozenset({SIBLING}))
    other = Sibling(3, "other", "imap", frozenset({"other@example.net"}))
    third = Sibling(4, "third", "imap", frozenset({"third@example.org"}))
    assert claimant(headers, [sib, other]) == other
    assert claimant(headers, [sib]) == sib
    assert claimant(headers, [third]) is None
    assert claimant([("Envelope-To", SIBLING)], [sib]) == sib


def test_gmail_first_the_sibling_takes_the_row_over_without_the_pipeline(linked: Linked) -> None:
    """Stored by Gmail first, the message moves to the sibling when its IMAP sync sees it:
    same row, the sibling's location, one JMAP "created" ever, the rule not run again."""
    store, settings, gmail_emulator = linked.store, linked.settings, linked.gmail
    gmail_account, sibling, sibling_box = linked.gmail_account, linked.sibling, linked.box
    raw = original("g1")
    gmail_id = gmail_emulator.add_message(fetched_by_gmail(raw), ["INBOX", "UNREAD"])
    fetch_gmail(store, settings, gmail_account)
    [(row, holder)] = rows(store, "g1")
    assert holder == gmail_account and "Ruled" in labels_of(store, row)
    unlabel(store, row, "Ruled")  # the owner sorted it by hand since
    sibling_box.append("INBOX", raw)
    fetch_imap(store, settings, sibling)
    assert rows(store, "g1") == [(row, sibling)]
    assert labels_of(store, row) == {"Inbox"}  # the rule did not run again
    assert created(store, row) == 1
    with store.session() as session:
        assert session.scalar(select(func.count()).where(MessageLocation.message_id == row)) == 1
    assert linked_ids(store, gmail_account) == {gmail_id}
    gmail_emulator.clear_log()
    fetch_gmail(store, settings, gmail_account)  # Gmail lists it again: nothing is fetched
    assert rows(store, "g1") == [(row, sibling)]
    assert not gmail_emulator.calls("messages.get")


def test_imap_first_gmail_does_not_store_it_again(linked: Linked) -> None:
    """Stored by the sibling's IMAP sync first, the Gmail copy is attached to that row: no
    second row, no second "created", the rule not run again, the id in the ledger."""
    store, settings, gmail_emulator = linked.store, linked.settings, linked.gmail
    gmail_account, sibling, sibling_box = linked.gmail_account, linked.sibling, linked.box
    raw = original("i1")
    sibling_box.append("INBOX", raw)
    fetch_imap(store, settings, sibling)
    [(row, holder)] = rows(store, "i1")
    assert holder == sibling and "Ruled" in labels_of(store, row)
    unlabel(store, row, "Ruled")
    gmail_id = gmail_emulator.add_message(fetched_by_gmail(raw), ["INBOX", "UNREAD"])
    fetch_gmail(store, settings, gmail_account)
    assert rows(store, "i1") == [(row, sibling)]
    assert labels_of(store, row) == {"Inbox"}
    assert created(store, row) == 1
    assert linked_ids(store, gmail_account) == {gmail_id}
    fetch_imap(store, settings, sibling)
    assert rows(store, "i1") == [(row, sibling)]


def test_send_as_forwarded_and_drafts_belong_to_the_gmail_account(linked: Linked) -> None:
    """Mail sent from the sibling's address, mail forwarded from an address not connected
    here and drafts stay in the Gmail account, even when the sibling's server has a copy."""
    store, settings, gmail_emulator = linked.store, linked.settings, linked.gmail
    gmail_account, sibling, sibling_box = linked.gmail_account, linked.sibling, linked.box
    sent = make_message(
        "From me", sender=SIBLING, to="friend@example.org", message_id="<s1@example.org>"
    )
    forwarded = fetched_by_gmail(original("f1", to="old@elsewhere.example"))
    draft = make_message("Draft", sender=OWNER, message_id="<d1@example.org>")
    gmail_emulator.add_message(sent, ["SENT"])
    gmail_emulator.add_message(forwarded, ["INBOX"])
    gmail_emulator.add_message(draft, ["DRAFT"])
    fetch_gmail(store, settings, gmail_account)
    sibling_box.append("INBOX", sent)  # e.g. a copy the sibling's server kept
    fetch_imap(store, settings, sibling)
    for key in ("s1", "f1", "d1"):
        assert gmail_account in {holder for _row, holder in rows(store, key)}, key
    assert not linked_ids(store, gmail_account)
