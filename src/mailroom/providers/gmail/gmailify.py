"""Gmailify and linked accounts: one message, one row, in the account with the better claim.

A Gmail account can fetch another address's mail (Gmailify, "check mail from
other accounts"). When that other account is connected to mailroom too, under
the same owner, both would store the message and the unified inbox would show
it twice. SPEC §1 and seed 000 give the rule:

* **The better claim** is the account whose address the message's *delivery
  headers* name (``Delivered-To``, ``X-Original-To``, ``Envelope-To``, the
  ``for <address>`` of a ``Received`` line); the topmost one a sibling owns
  wins (the mailbox Gmail fetched from; one further down forwarded to it).
  :func:`claimant` decides. Everything else in the Gmail mailbox belongs to the
  Gmail account: mail sent from a send-as address, mail forwarded from an
  address not connected here, drafts — none name a sibling in delivery headers.
* **Gmail's batch handler** (:func:`linked_rows`, used by :mod:`.intake`): a
  message that names a sibling which already holds it (the same Message-ID,
  stored by the sibling's own sync) is not stored again; the Gmail id goes to
  the skipped ledger as kind :data:`LINKED`, so the listing counts it as done.
  A message whose sibling does not hold it yet is stored in the Gmail account.
* **The sibling's claim** (:func:`claim_linked`, the hook of
  :func:`mailroom.ingest.commit.commit_batch`): when a batch of another account
  brings a message whose Message-ID a Gmail account of the same owner holds,
  and that row's delivery headers name this account first, the row *moves*:
  its account and provider id become the sibling's, the sibling's locations
  are added, its Gmail id goes to that Gmail account's ledger, and the item
  leaves the batch.

Neither branch runs the post-ingest pipeline (seed 000): the row went through
it once already, so a second run would announce a JMAP "created" for an id
clients already hold and run the owner's rules again over mail they may have
sorted by hand since. A moved row keeps its labels, read and star state,
thread and tab; JMAP hears "updated" for it and its thread.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.parser import BytesHeaderParser
from email.policy import compat32
from email.utils import getaddresses

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from mailroom.categories.explaining import addresses_in
from mailroom.crypto.mail_reading import columns_of
from mailroom.crypto.message_fields import LookupKeys
from mailroom.ingest.mirror import ChangeSet
from mailroom.ingest.model import IncomingMessage
from mailroom.mime.msgids import normalize_message_id
from mailroom.providers.gmail.skipped import LINKED, SkippedEntry, record_skipped
from mailroom.store.bulk import insert_ignoring_conflicts
from mailroom.store.keys import id_key
from mailroom.store.models import Account, Message, MessageLocation

__all__ = [
    "Sibling",
    "claim_linked",
    "claimant",
    "delivery_addresses",
    "linked_entry",
    "linked_rows",
    "message_key",
    "siblings_of",
]

GMAIL = "gmail"
_NOT_SIBLINGS = ("jmap",)  # the account of mail that came in over JMAP is no mailbox
_DELIVERY = ("delivered-to", "x-original-to", "envelope-to", "x-envelope-to")
_RECEIVED_FOR = re.compile(r"\bfor\s+<?([^\s<>;@]+@[^\s<>;]+?)>?\s*(?:;|$|\s)", re.IGNORECASE)
_HEAD_END = re.compile(rb"\r?\n\r?\n")


@dataclass(frozen=True)
class Sibling:
    """Another connected account of the same owner, with the addresses it receives at."""

    account_id: int
    name: str
    provider: str
    addresses: frozenset[str]


def siblings_of(session: Session, user_id: int, account_id: int) -> list[Sibling]:
    """The owner's other connected mail accounts that name an address, in id order."""
    rows = session.execute(
        select(Account.id, Account.name, Account.provider, Account.settings)
        .where(
            Account.user_id == user_id,
            Account.id != account_id,
            Account.status != "disconnected",
            Account.provider.not_in(_NOT_SIBLINGS),
        )
        .order_by(Account.id)
    )
    found = [
        Sibling(
            int(row.id), str(row.name), str(row.provider), frozenset(addresses_in(row.settings))
        )
        for row in rows
    ]
    return [sibling for sibling in found if sibling.addresses]


def _headers(raw: bytes) -> list[tuple[str, str]]:
    """(lower-case name, value) of every header of ``raw``, in order (top first)."""
    end = _HEAD_END.search(raw)
    head = raw[: end.end()] if end else raw
    parsed = BytesHeaderParser(policy=compat32).parsebytes(head, headersonly=True)
    return [(name.lower(), str(value)) for name, value in parsed.items()]


def delivery_addresses(headers: Iterable[Sequence[str]]) -> list[str]:
    """The addresses the delivery headers name, top first, lower-case, each once."""
    named: list[str] = []
    for name, value in ((str(h[0]).lower(), str(h[1])) for h in headers):
        if name in _DELIVERY:
            named += [address for _n, address in getaddresses([value]) if "@" in address]
        elif name == "received":
            named += _RECEIVED_FOR.findall(" ".join(value.split()))
    return list(dict.fromkeys(address.strip().lower() for address in named))


def claimant(headers: Iterable[Sequence[str]], siblings: Sequence[Sibling]) -> Sibling | None:
    """The sibling with the better claim: the one owning the topmost delivery address named."""
    for address in delivery_addresses(headers):
        for sibling in siblings:
            if address in sibling.addresses:
                return sibling
    return None


def message_key(headers: Iterable[Sequence[str]]) -> str | None:
    """The Message-ID as ``messages.message_id_header`` stores it (None without one)."""
    for name, value in ((str(h[0]).lower(), str(h[1])) for h in headers):
        if name == "message-id":
            normalized = normalize_message_id(value)
            return id_key(normalized) if normalized else None
    return None


def linked_rows(
    session: Session, user_id: int, siblings: Sequence[Sibling], raws: Mapping[str, bytes]
) -> dict[str, tuple[Sibling, int]]:
    """Of Gmail's messages (Gmail id → raw bytes), those a sibling with the better claim
    already holds: Gmail id → (the sibling, its row's id)."""
    if not siblings:
        return {}
    wanted: dict[str, tuple[Sibling, str]] = {}
    for gmail_id, raw in raws.items():
        headers = _headers(raw)
        sibling = claimant(headers, siblings)
        key = message_key(headers) if sibling is not None else None
        if sibling is not None and key is not None:
            wanted[gmail_id] = (sibling, key)
    if not wanted:
        return {}
    forms = LookupKeys(session, user_id).id_forms({k for _s, k in wanted.values()})
    held = {
        (int(account), forms[str(stored)]): int(message_id)
        for message_id, account, stored in session.execute(
            select(Message.id, Message.account_id, Message.message_id_header).where(
                Message.user_id == user_id,
                Message.account_id.in_({s.account_id for s, _k in wanted.values()}),
                Message.message_id_header.in_(sorted(forms)),
            )
        )
    }
    return {
        gmail_id: (sibling, held[(sibling.account_id, key)])
        for gmail_id, (sibling, key) in wanted.items()
        if (sibling.account_id, key) in held
    }


def _item_key(item: IncomingMessage) -> str | None:
    if item.parsed is not None:
        mid = item.parsed.message_id
        return id_key(mid) if mid else None
    return message_key(_headers(item.raw)) if item.raw else None


def linked_entry(gmail_id: str, sibling: str) -> SkippedEntry:
    """The ledger entry of a Gmail id whose message the linked account ``sibling`` holds."""
    reason = f"stored by the linked account {sibling!r}, named in its delivery headers"
    return SkippedEntry(gmail_id, LINKED, reason)


def claim_linked(
    session: Session, account_id: int, user_id: int, items: Sequence[IncomingMessage]
) -> list[IncomingMessage]:
    """Move the Gmail rows this account has the better claim to; the items left to store.

    The hook of ``commit_batch``, inside its transaction. Cheap when it does
    nothing: one query when the owner has no Gmail account besides this one.
    """
    accounts = {
        int(row.id): row
        for row in session.execute(
            select(Account.id, Account.name, Account.provider, Account.settings).where(
                Account.user_id == user_id, Account.provider.not_in(_NOT_SIBLINGS)
            )
        )
    }
    gmail = [a for a, row in accounts.items() if row.provider == GMAIL and a != account_id]
    me = accounts.get(account_id)
    if not gmail or me is None or not addresses_in(me.settings):
        return list(items)
    keys = {item.provider_id: _item_key(item) for item in items}
    stored_here = set(
        session.scalars(
            select(Message.provider_id).where(
                Message.account_id == account_id, Message.provider_id.in_(list(keys))
            )
        )
    )
    by_key: dict[str, IncomingMessage] = {}
    for item in items:
        key = keys[item.provider_id]
        if key is not None and item.provider_id not in stored_here:
            by_key.setdefault(key, item)
    if not by_key:
        return list(items)
    forms = LookupKeys(session, user_id).id_forms(by_key)  # sealed rows hold keyed hashes
    candidates = session.execute(
        select(Message.id, Message.account_id, Message.provider_id, Message.message_id_header)
        .where(
            Message.user_id == user_id,
            Message.account_id.in_(gmail),
            Message.message_id_header.in_(sorted(forms)),
        )
        .order_by(Message.id)
    ).all()
    if not candidates:
        return list(items)
    headers = {
        message_id: columns["headers"]
        for message_id, columns in columns_of(
            session, [c.id for c in candidates], ["headers"]
        ).items()
    }
    views: dict[int, list[Sibling]] = {}  # each Gmail account's siblings
    claimed: dict[str, int] = {}  # provider id of the item → the row it takes over
    ledger: dict[int, list[SkippedEntry]] = {}  # Gmail account → its ids now elsewhere
    for row in candidates:
        key = forms[str(row.message_id_header)]
        wanted = by_key.get(key)
        if wanted is None:
            continue
        holder = int(row.account_id)
        if holder not in views:
            views[holder] = siblings_of(session, user_id, holder)
        winner = claimant(headers.get(row.id) or [], views[holder])
        if winner is None or winner.account_id != account_id:
            continue
        claimed[wanted.provider_id] = int(row.id)
        ledger.setdefault(holder, []).append(linked_entry(str(row.provider_id), str(me.name)))
        del by_key[key]
    if not claimed:
        return list(items)
    _move(session, account_id, user_id, claimed, items, ledger)
    return [item for item in items if item.provider_id not in claimed]


def _move(
    session: Session,
    account_id: int,
    user_id: int,
    claimed: Mapping[str, int],
    items: Sequence[IncomingMessage],
    ledger: Mapping[int, list[SkippedEntry]],
) -> None:
    """Give the claimed rows to this account: provider id, locations, ledger, JMAP "updated"."""
    for provider_id, message_id in claimed.items():
        session.execute(
            update(Message)
            .where(Message.id == message_id)
            .values(account_id=account_id, provider_id=provider_id)
        )
    locations = [
        {
            "message_id": claimed[item.provider_id],
            "folder_id": loc.folder_id,
            "uidvalidity": loc.uidvalidity,
            "uid": loc.uid,
            "provider_ref": loc.provider_ref,
        }
        for item in items
        if item.provider_id in claimed
        for loc in item.locations
    ]
    if locations:
        insert_ignoring_conflicts(session, MessageLocation, locations)
    now = datetime.now(UTC)
    for gmail_account, entries in ledger.items():
        record_skipped(session, gmail_account, entries, now)
    ChangeSet(emails=set(claimed.values())).record(session, user_id)  # and their threads
