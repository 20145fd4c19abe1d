"""The skipped ledger for Gmail: messages the engine looked at and could not store.

Gmail lists ids it cannot give as mail: chats (the one kind there is no
place for) and ids that answer 404 when fetched; and ids whose message a
linked account of the owner holds (Gmailify, :mod:`.gmailify`). Each gets a row in the
provider-neutral ``skipped_messages`` ledger with the reason, its label ids
and its address headers (``From``, ``To``, ``Cc``, ``Delivered-To``, each cut
to :data:`HEADER_LENGTH`), so a person can see what was left out and why. For an
owner whose new mail is sealed the headers and reason are sealed like their mail
(:mod:`mailroom.providers.sealed_ledger`), and the listing opens them.

Invariants:

* One row per (account, Gmail id): recording a message again only updates
  its reason, labels, headers and ``last_seen_at`` (``created_at`` stays the
  first sight). :func:`record_skipped` must be idempotent, and is.
* The listing treats a recorded id as done (:func:`skipped_ids`), so it is
  not fetched again every hour, and a backfill whose every listed message has
  an answer ends in that pass instead of at its attempt cap.
* :func:`forget_skipped` deletes the rows of an account (all, or some ids),
  so the next listing asks Gmail again; the batch handler forgets an id as
  soon as its message is stored after all.

The kinds and the listing (:func:`list_skipped`) live in
:mod:`~mailroom.providers.gmail.skipped_listing`, plain SQL for the read command.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from mailroom.providers.gmail.skipped_listing import (
    CHAT,
    LINKED,
    NOT_FOUND,
    SkippedRecord,
    list_skipped,
)
from mailroom.providers.sealed_ledger import write_ledger
from mailroom.store.models import SkippedMessage

__all__ = [
    "ADDRESS_HEADERS",
    "CHAT",
    "HEADER_LENGTH",
    "LINKED",
    "NOT_FOUND",
    "SKIP_KINDS",
    "SkippedEntry",
    "SkippedRecord",
    "address_headers",
    "forget_skipped",
    "list_skipped",
    "record_skipped",
    "skipped_ids",
]

SKIP_KINDS = (CHAT, NOT_FOUND, LINKED)

ADDRESS_HEADERS = ("from", "to", "cc", "delivered-to")
HEADER_LENGTH = 998  # RFC 5322's line limit: enough for any honest header, bounded for others
_LABEL_LIMIT = 200  # label ids kept per message (Gmail allows far fewer on one message)


@dataclass(frozen=True)
class SkippedEntry:
    """A message to record: its Gmail id, why it was skipped, its labels and address headers."""

    provider_id: str
    kind: str
    reason: str
    label_ids: Sequence[str] = ()
    headers: Mapping[str, str] = field(default_factory=dict)


def address_headers(headers: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """The address headers of a Gmail ``payload.headers`` list, names lower-case, values bounded.

    The first of each name counts, as a mail reader shows it.
    """
    found: dict[str, str] = {}
    for header in headers:
        name = str(header.get("name", "")).lower()
        if name in ADDRESS_HEADERS and name not in found:
            found[name] = str(header.get("value", ""))[:HEADER_LENGTH]
    return found


def _row(account_id: int, entry: SkippedEntry, now: datetime) -> dict[str, object]:
    headers = {
        name.lower(): value[:HEADER_LENGTH]
        for name, value in entry.headers.items()
        if name.lower() in ADDRESS_HEADERS
    }
    return {
        "account_id": account_id,
        "provider_id": entry.provider_id,
        "kind": entry.kind,
        "reason": entry.reason,
        "labels": list(entry.label_ids)[:_LABEL_LIMIT],
        "headers": headers,
        "created_at": now,
        "last_seen_at": now,
    }


def record_skipped(
    session: Session, account_id: int, entries: Iterable[SkippedEntry], now: datetime
) -> None:
    """Record ``entries`` for the account (idempotent: a known id only gets seen again)."""
    rows = {entry.provider_id: _row(account_id, entry, now) for entry in entries}
    if not rows:
        return
    for entry_kind in {str(row["kind"]) for row in rows.values()}:
        if entry_kind not in SKIP_KINDS:
            raise ValueError(f"unknown kind of skipped Gmail message: {entry_kind!r}")
    dialect = session.get_bind().dialect.name
    insert = (sqlite if dialect == "sqlite" else postgresql).insert(SkippedMessage)
    statement = insert.on_conflict_do_update(
        index_elements=["account_id", "provider_id"],
        set_={
            name: insert.excluded[name]
            for name in ("kind", "reason", "labels", "headers", "last_seen_at")
        },
    )
    write_ledger(session, statement, list(rows.values()))


def skipped_ids(session: Session, account_id: int, provider_ids: Iterable[str]) -> set[str]:
    """Which of ``provider_ids`` the account's ledger holds: the listing counts them as done."""
    wanted = list(dict.fromkeys(provider_ids))
    found: set[str] = set()
    for start in range(0, len(wanted), 500):  # a listing page at a time, under any bind limit
        chunk = wanted[start : start + 500]
        found.update(
            session.scalars(
                select(SkippedMessage.provider_id).where(
                    SkippedMessage.account_id == account_id,
                    SkippedMessage.provider_id.in_(chunk),
                )
            )
        )
    return found


def forget_skipped(
    session: Session, account_id: int, provider_ids: Iterable[str] | None = None
) -> int:
    """Delete the account's ledger rows (all, or only ``provider_ids``); how many went."""
    statement = delete(SkippedMessage).where(SkippedMessage.account_id == account_id)
    if provider_ids is not None:
        ids = list(provider_ids)
        if not ids:
            return 0
        statement = statement.where(SkippedMessage.provider_id.in_(ids))
    result = session.execute(statement)
    return int(getattr(result, "rowcount", 0) or 0)
