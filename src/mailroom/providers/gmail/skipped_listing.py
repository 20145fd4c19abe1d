"""The Gmail skipped ledger as `mailroom gmail skipped` reads it: its kinds and its rows.

Plain SQL through a :class:`~mailroom.store.reader.Reader` (or the same SQL in a
session), so the listing starts without SQLAlchemy or the ORM, as the other read
commands do; recording and forgetting rows is :mod:`mailroom.providers.gmail.skipped`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from mailroom.store.reader import Reader, as_reader, in_list, json_value, required_stamp

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

__all__ = ["CHAT", "LINKED", "NOT_FOUND", "SkippedRecord", "list_skipped"]

CHAT = "chat"  # a Hangouts/Chat message: Gmail lists it, mail has no place for it
NOT_FOUND = "not_found"  # listed, but messages.get answered 404
LINKED = "linked"  # Gmailify: stored by a linked account of the owner, which has the better claim


@dataclass(frozen=True)
class SkippedRecord:
    """A row of the ledger as the command shows it."""

    account_id: int
    provider_id: str
    kind: str
    reason: str
    label_ids: list[str]
    headers: dict[str, str]
    first_seen: datetime
    last_seen: datetime


def list_skipped(source: Reader | Session, account_ids: Sequence[int]) -> list[SkippedRecord]:
    """The ledger rows of these accounts, by kind, then most recently seen first."""
    if not account_ids:
        return []
    ids, params = in_list("account", account_ids)
    rows = as_reader(source).rows(
        "SELECT account_id, provider_id, kind, reason, labels, headers, created_at, last_seen_at "
        f"FROM skipped_messages WHERE account_id IN {ids} "
        "ORDER BY kind, last_seen_at DESC, provider_id",
        params,
    )
    return [
        SkippedRecord(
            account_id=account_id,
            provider_id=provider_id,
            kind=kind,
            reason=reason,
            label_ids=list(json_value(labels) or []),
            headers=dict(json_value(headers) or {}),
            first_seen=required_stamp(created_at),
            last_seen=required_stamp(last_seen_at),
        )
        for account_id, provider_id, kind, reason, labels, headers, created_at, last_seen_at in rows
    ]
