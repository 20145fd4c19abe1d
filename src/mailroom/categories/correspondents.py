"""The owner's addresses, switched-off tabs and correspondents (the ``contacts`` table).

A *correspondent* is an address the owner has written to: a recipient (To,
Cc, Bcc) of a message in the Sent label (role ``sent``) or of a message whose
From is one of the owner's own addresses. ``contacts`` keeps one row per
(user, address) with how many such messages there are and the newest one's
time. Harvesting happens at ingest for every new message (pipeline stage
``harvest``, before ``categorize``) and again from scratch in
``mailroom backfill categories`` (``rebuild_contacts``), which makes the
counts exact whatever happened before.

The owner's own addresses are read from the accounts' settings (``email``,
``address``, ``login``, ``username`` when they hold an ``@``, and an
``addresses`` list) and from ``users.settings["addresses"]``; they are never
their own correspondents. ``users.settings["categories_off"]`` lists the tabs
the owner switched off.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, case, delete, func, not_, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from mailroom.categories.explaining import addresses_in, tabs_off
from mailroom.categories.learned import LearnedTabs
from mailroom.categories.sealed_rows import Where, from_candidates, has_sealed, sealed_rows
from mailroom.crypto.message_fields import LookupKeys, open_rows
from mailroom.store.chunks import in_chunks
from mailroom.store.models import Account, Contact, Label, Message, MessageLabel, User


def owner_addresses(session: Session, user_id: int) -> frozenset[str]:
    """The owner's own mail addresses, from account and user settings (lower-case)."""
    found: set[str] = set()
    for settings in session.scalars(select(Account.settings).where(Account.user_id == user_id)):
        found |= addresses_in(settings)
    found |= addresses_in(session.scalar(select(User.settings).where(User.id == user_id)))
    return frozenset(found)


def switched_off(session: Session, user_id: int) -> frozenset[str]:
    """The tabs the owner switched off (``users.settings["categories_off"]``)."""
    return tabs_off(session.scalar(select(User.settings).where(User.id == user_id)))


def learned_tabs(session: Session, user_id: int) -> LearnedTabs:
    """What the owner's tab corrections teach (``users.settings["tab_corrections"]``)."""
    return LearnedTabs.from_settings(
        session.scalar(select(User.settings).where(User.id == user_id))
    )


def sent_label_id(session: Session, user_id: int) -> int | None:
    """The id of the owner's Sent label, if it exists."""
    return session.scalar(select(Label.id).where(Label.user_id == user_id, Label.role == "sent"))


@dataclass(frozen=True, slots=True)
class SentMessage:
    """One message the owner sent: its recipients and when."""

    recipients: Sequence[str]
    sent_at: datetime | None


def _upsert(session: Session, user_id: int, counts: dict[str, tuple[int, datetime | None]]) -> None:
    if not counts:
        return
    keys = LookupKeys(session, user_id)  # a sealing owner's contacts are keyed hashes
    rows = [
        {
            "user_id": user_id,
            "email": keys.stored_address(email)[:500],
            "sent_count": n,
            "last_sent_at": last,
        }
        for email, (n, last) in sorted(counts.items())
    ]
    dialect = session.get_bind().dialect.name
    insert = sqlite.insert if dialect == "sqlite" else postgresql.insert
    for chunk in in_chunks(rows):
        statement = insert(Contact).values(chunk)
        excluded = statement.excluded
        newer = case(
            (Contact.last_sent_at.is_(None), excluded.last_sent_at),
            (excluded.last_sent_at.is_(None), Contact.last_sent_at),
            (excluded.last_sent_at > Contact.last_sent_at, excluded.last_sent_at),
            else_=Contact.last_sent_at,
        )
        session.execute(
            statement.on_conflict_do_update(
                index_elements=["user_id", "email"],
                set_={
                    "sent_count": Contact.sent_count + excluded.sent_count,
                    "last_sent_at": newer,
                },
            )
        )


def _count(
    sent: Iterable[SentMessage], own: Collection[str]
) -> dict[str, tuple[int, datetime | None]]:
    counts: dict[str, tuple[int, datetime | None]] = {}
    for message in sent:
        for email in {r.strip().lower() for r in message.recipients if r and "@" in r}:
            if email in own:
                continue
            n, last = counts.get(email, (0, None))
            if last is None or (message.sent_at is not None and message.sent_at > last):
                last = message.sent_at
            counts[email] = (n + 1, last)
    return counts


def harvest(
    session: Session, user_id: int, sent: Iterable[SentMessage], own: Collection[str]
) -> set[str]:
    """Count the recipients of messages the owner sent; returns addresses that are new contacts."""
    counts = _count(sent, own)
    if not counts:
        return set()
    known = correspondents_among(session, user_id, counts)
    _upsert(session, user_id, counts)
    return set(counts) - known


def correspondents_among(session: Session, user_id: int, emails: Iterable[str]) -> frozenset[str]:
    """Which of these (lower-case) addresses the owner has written to.

    Looked up by every form a contact may be stored in (clear, or the owner's keyed
    hash under each key version: :meth:`LookupKeys.address_forms`).
    """
    forms = LookupKeys(session, user_id).address_forms({e.lower() for e in emails if e})
    found: set[str] = set()
    for chunk in in_chunks(sorted(forms)):
        found |= {
            forms[stored]
            for stored in session.scalars(
                select(Contact.email).where(
                    Contact.user_id == user_id,
                    Contact.email.in_(chunk),
                    Contact.sent_count > 0,
                )
            )
        }
    return frozenset(found)


def _emails(recipients: Any) -> list[str]:
    found: list[str] = []
    if isinstance(recipients, dict):
        for kind in ("to", "cc", "bcc"):
            for entry in recipients.get(kind) or []:
                if isinstance(entry, list | tuple) and len(entry) == 2 and entry[1]:
                    found.append(str(entry[1]))
    return found


def sent_messages(session: Session, user_id: int) -> list[SentMessage]:
    """Every stored message the owner sent (Sent label or own From), from stored data."""
    own = owner_addresses(session, user_id)
    sent_label = sent_label_id(session, user_id)
    in_sent = (
        select(MessageLabel.message_id).where(MessageLabel.label_id == sent_label)
        if sent_label is not None
        else None
    )
    conditions: list[ColumnElement[bool]] = []
    if in_sent is not None:
        conditions.append(Message.id.in_(in_sent))
    if own:
        conditions.append(func.lower(Message.from_email).in_(sorted(own)))
    if not conditions:
        return []
    selected = (
        Message.id,
        Message.user_id,
        Message.sealed,
        Message.recipients,
        Message.sent_at,
        Message.received_at,
    )
    sealed = has_sealed(session, user_id)
    if sealed and own:  # a sealed sender is compared once opened, below
        conditions[-1] = and_(not_(Message.sealed), conditions[-1])
    rows = open_rows(
        session,
        session.execute(select(*selected).where(Message.user_id == user_id, or_(*conditions))),
        ["recipients"],
    )
    if sealed and own:
        outside: list[Where] = [] if in_sent is None else [Message.id.not_in(in_sent)]
        outside += from_candidates(session, user_id, sorted(own))  # the blind index
        rows += [
            row
            for row in sealed_rows(
                session,
                user_id,
                ["from_email", "recipients"],
                where=outside,
                also=["sent_at", "received_at"],
            )
            if (row["from_email"] or "").lower() in own
        ]
    return [SentMessage(_emails(r["recipients"]), r["sent_at"] or r["received_at"]) for r in rows]


def rebuild_contacts(session: Session, user_id: int) -> tuple[int, set[str]]:
    """Recount every correspondent from stored mail; returns (contacts, newly added addresses).

    Every contact is written again in the form the owner's new rows take (clear, or
    the keyed hash under the newest key version).
    """
    before = set(session.scalars(select(Contact.email).where(Contact.user_id == user_id)))
    session.execute(delete(Contact).where(Contact.user_id == user_id))
    counts = _count(sent_messages(session, user_id), owner_addresses(session, user_id))
    _upsert(session, user_id, counts)
    forms = LookupKeys(session, user_id).address_forms(counts)
    return len(counts), set(counts) - {forms[f] for f in before if f in forms}


def senders_by_address(
    session: Session, user_id: int, emails: Collection[str]
) -> dict[str, list[int]]:
    """Stored messages of the user from each of these (lower-case) addresses."""
    found: dict[str, list[int]] = defaultdict(list)
    wanted = sorted(emails)
    for chunk in in_chunks(wanted):
        rows = session.execute(
            select(Message.id, func.lower(Message.from_email)).where(
                Message.user_id == user_id,
                func.lower(Message.from_email).in_(chunk),
            )
        )
        for message_id, email in rows:
            found[email].append(message_id)
    if wanted and has_sealed(session, user_id):  # sealed senders: compared once opened
        for chunk in in_chunks(wanted, _ADDRESSES_PER_QUERY):
            looked_for = set(chunk)
            where = from_candidates(session, user_id, chunk)
            for row in sealed_rows(session, user_id, ["from_email"], where=where):
                email = (row["from_email"] or "").lower()
                if email in looked_for:
                    found[email].append(int(row["id"]))
    return found


_ADDRESSES_PER_QUERY = 50
