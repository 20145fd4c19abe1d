"""The Gmail skipped ledger as `mailroom gmail skipped` reads it: its kinds and its rows.

Plain SQL through a :class:`~mailroom.store.reader.Reader` (or the same SQL in a
session), so the listing starts without SQLAlchemy or the ORM, as the other read
commands do; recording and forgetting rows is :mod:`mailroom.providers.gmail.skipped`.

A sealing owner's rows hold their headers and reason sealed
(:mod:`mailroom.providers.sealed_ledger`); they are opened here, so the listing
reads the same for sealed and clear rows. A bare file reader has no keys: meeting
a sealed row it raises :class:`~mailroom.errors.SealedWithoutKeys`, and the
command reads again through a session of the store.
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
        # The headers as JSON text on both databases: a sealed row's are a JSON string,
        # which PostgreSQL's driver would otherwise hand over already parsed.
        "SELECT s.account_id, s.provider_id, s.kind, s.reason, s.labels, "
        "CAST(s.headers AS TEXT), "
        "s.created_at, s.last_seen_at, s.id, a.user_id "
        "FROM skipped_messages s JOIN accounts a ON a.id = s.account_id "
        f"WHERE s.account_id IN {ids} "
        "ORDER BY s.kind, s.last_seen_at DESC, s.provider_id",
        params,
    )
    records = []
    for account_id, provider_id, kind, reason, labels, stored, created, last, row_id, owner in rows:
        headers = json_value(stored)
        if isinstance(headers, str):  # sealed: a clear row's headers are a JSON object
            headers, reason = _opened(source, owner, row_id, headers, reason)
        records.append(
            SkippedRecord(
                account_id=account_id,
                provider_id=provider_id,
                kind=kind,
                reason=reason,
                label_ids=list(json_value(labels) or []),
                headers=dict(headers or {}),
                first_seen=required_stamp(created),
                last_seen=required_stamp(last),
            )
        )
    return records


def _opened(
    source: Reader | Session, owner: int, row_id: int, headers: str, reason: str
) -> tuple[dict[str, str], str]:
    """A sealed row's headers and reason, opened (loaded only for a sealed row)."""
    from mailroom.crypto.mail_reading import session_of
    from mailroom.providers.sealed_ledger import open_ledger_row

    return open_ledger_row(session_of(source), int(owner), int(row_id), headers, reason)
