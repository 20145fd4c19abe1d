"""Storing one batch of messages from a provider, exactly once.

Invariants:
- A message is (account, provider id); the insert is ``ON CONFLICT DO
  NOTHING`` on that unique constraint, so overlapping batches, retries and
  a rerun after a crash never create a second row (no read-before-insert).
- A batch is one transaction: after a kill, either all of it is there or
  none of it, and the rerun stores what is missing.
- A message that cannot be parsed is still stored with its raw bytes and a
  parse note; only the message itself can fail, never the batch.
- Only rows that this call inserted get the JMAP "created" change; a message
  seen again only gains the labels and locations it did not have.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from mailroom.conversations.references import reference_chain
from mailroom.conversations.subject import subject_key
from mailroom.crypto.mail_writing import sealed_blob_key
from mailroom.crypto.message_fields import PLACEHOLDERS, LookupKeys, seal_inserted
from mailroom.crypto.sealing import sealing_cipher
from mailroom.ingest.model import Batch, BatchResult, IncomingMessage, StoredMessage
from mailroom.ingest.pipeline import run_pipeline
from mailroom.mime import Address, ParsedMessage, parse_message
from mailroom.store import changelog
from mailroom.store.bulk import insert_ignoring_conflicts
from mailroom.store.keys import id_key
from mailroom.store.models import (
    Message,
    MessageKeyword,
    MessageLabel,
    MessageLocation,
    MessageRef,
)
from mailroom.store.search import SearchDocument, index_documents

log = logging.getLogger(__name__)


def _insert(session: Session, table: Any) -> sqlite.Insert | postgresql.Insert:
    if session.get_bind().dialect.name == "sqlite":
        return sqlite.insert(table)
    return postgresql.insert(table)


def _arrival_time(parsed: ParsedMessage, item: IncomingMessage) -> datetime:
    if item.received_at is not None:
        return item.received_at
    value = parsed.header("received")
    if value is not None:
        _, _, when = value.rpartition(";")
        try:
            stamp: datetime | None = parsedate_to_datetime(when.strip())
        except (TypeError, ValueError, IndexError):
            stamp = None
        if stamp is not None and stamp.tzinfo is not None:
            return stamp.astimezone(UTC)
    if parsed.date is not None:
        return parsed.date
    return item.fallback_time or datetime.now(UTC)


def _addresses(addresses: Sequence[Address]) -> list[list[str]]:
    return [[address.name, address.email] for address in addresses]


def _message_row(
    parsed: ParsedMessage,
    item: IncomingMessage,
    account_id: int,
    user_id: int,
    lookups: LookupKeys,
) -> dict[str, Any]:
    sender = parsed.from_[0] if parsed.from_ else None
    received = _arrival_time(parsed, item)
    raw_sha256 = item.raw_sha256
    if raw_sha256 is None and item.raw is not None:
        raw_sha256 = hashlib.sha256(item.raw).hexdigest()
    notes = list(parsed.notes)
    message_id = id_key(parsed.message_id) if parsed.message_id else None
    if message_id != parsed.message_id:
        notes.append("Message-ID longer than 1,000 bytes; indexed by its SHA-256")
    return {
        "user_id": user_id,
        "account_id": account_id,
        "provider_id": item.provider_id,
        "provider_thread_id": item.provider_thread_id,
        "message_id_header": lookups.stored_id(message_id) if message_id else None,
        "subject": parsed.subject,
        "subject_key": subject_key(parsed.subject, lookups),
        "from_name": sender.name if sender else "",
        "from_email": sender.email if sender else "",
        "recipients": {
            "to": _addresses(parsed.to),
            "cc": _addresses(parsed.cc),
            "bcc": _addresses(parsed.bcc),
            "reply_to": _addresses(parsed.reply_to),
        },
        "sent_at": parsed.date,
        "received_at": received,
        "size": parsed.size,
        "preview": parsed.preview[:256],
        "has_attachment": bool(parsed.attachments),
        "list_id": parsed.header("list-id") or None,
        "seen_at": received if item.seen else None,
        "parse_notes": notes,
        "raw_sha256": raw_sha256,
        "created_at": datetime.now(UTC),
    }


def _parse(item: IncomingMessage, result: BatchResult) -> ParsedMessage | None:
    if item.parsed is not None:
        return item.parsed
    try:
        return parse_message(item.raw or b"", received_at=item.received_at or item.fallback_time)
    except Exception as exc:  # parse_message promises not to raise; a bug must cost one message
        log.exception("Parsing message %s failed", item.provider_id)
        result.failed.append((item.provider_id, f"parse error: {exc}"))
        return None


def _merge_duplicates(items: Sequence[IncomingMessage]) -> list[IncomingMessage]:
    """One item per provider id; the labels and locations of repeats are merged."""
    merged: dict[str, IncomingMessage] = {}
    for item in items:
        first = merged.get(item.provider_id)
        if first is None:
            merged[item.provider_id] = item
            continue
        first.label_ids.extend(i for i in item.label_ids if i not in first.label_ids)
        first.locations.extend(loc for loc in item.locations if loc not in first.locations)
        first.seen = first.seen or item.seen
        first.keywords.extend(k for k in item.keywords if k not in first.keywords)
    return list(merged.values())


def store_batch(
    session: Session, account_id: int, user_id: int, items: Sequence[IncomingMessage]
) -> BatchResult:
    """Insert a batch, run the post-ingest pipeline on the new messages, flush.

    The caller owns the transaction (commit after this returns); steps that
    enqueue follow-up work run after that commit (see ``ingest.steps``).
    """
    result = BatchResult(account_id=account_id, user_id=user_id)
    unique = _merge_duplicates(items)
    parsed_by_id: dict[str, tuple[IncomingMessage, ParsedMessage]] = {}
    digests: dict[str, str | None] = {}
    rows = []
    cipher = sealing_cipher(session)
    lookups = LookupKeys(session, user_id)
    clear_columns: dict[str, dict[str, Any]] = {}  # sealed rows' mail columns, sealed once stored
    for item in unique:
        parsed = _parse(item, result)
        if parsed is None:
            continue
        parsed_by_id[item.provider_id] = (item, parsed)
        row = _message_row(parsed, item, account_id, user_id, lookups)
        if cipher is not None:
            if row["raw_sha256"] is not None:
                row["raw_sha256"] = sealed_blob_key(cipher, user_id, row["raw_sha256"])
            clear_columns[item.provider_id] = {column: row[column] for column in PLACEHOLDERS}
            row.update(PLACEHOLDERS, sealed=True)
        digests[item.provider_id] = row["raw_sha256"]
        rows.append(row)
    if not rows:
        return result
    inserted = insert_ignoring_conflicts(
        session,
        Message,
        rows,
        conflict=["provider_id", "account_id"],
        returning=["id", "provider_id"],
    )
    created = {row[1]: row[0] for row in inserted}
    sealed_writes = []
    if clear_columns:
        values = {mid: clear_columns[pid] for pid, mid in created.items()}
        sealed_writes.append(seal_inserted(session, user_id, values))
    existing: dict[str, int] = {}
    missing = [pid for pid in parsed_by_id if pid not in created]
    if missing:
        found = session.execute(
            select(Message.provider_id, Message.id).where(
                Message.account_id == account_id, Message.provider_id.in_(missing)
            )
        )
        existing = {provider_id: message_id for provider_id, message_id in found}
    _attach_labels_and_locations(session, parsed_by_id, created, existing, user_id)

    stored: list[StoredMessage] = []
    refs: list[dict[str, Any]] = []
    documents: list[SearchDocument] = []
    for provider_id, message_id in created.items():
        item, parsed = parsed_by_id[provider_id]
        chain = reference_chain(parsed)  # filtered and capped, see conversations.references
        stored.append(StoredMessage(message_id, item, parsed, digests[provider_id], chain))
        if parsed.notes:
            result.repaired += 1
        refs.extend(
            {"message_id": message_id, "ref": lookups.stored_id(ref), "position": pos}
            for pos, ref in enumerate(chain)
        )
        documents.append(
            SearchDocument(
                message_id,
                parsed.subject,
                parsed.participants(),
                parsed.text_body,
                parsed.blind_entry,
            )
        )
    if refs:
        insert_ignoring_conflicts(session, MessageRef, refs)
    index_documents(session, documents, user_id)
    result.created_ids = [message.message_id for message in stored]
    result.duplicate_ids = list(existing.values())
    session.flush()
    batch = Batch(session, account_id, user_id, stored, result.thread_ids)
    batch.sealed_writes.extend(sealed_writes)
    run_pipeline(batch)
    return result


def _attach_labels_and_locations(
    session: Session,
    parsed_by_id: dict[str, tuple[IncomingMessage, ParsedMessage]],
    created: dict[str, int],
    existing: dict[str, int],
    user_id: int,
) -> None:
    label_rows: list[dict[str, int]] = []
    location_rows: list[dict[str, Any]] = []
    keyword_rows: list[dict[str, Any]] = []
    for provider_id, (item, _parsed) in parsed_by_id.items():
        message_id = created.get(provider_id) or existing.get(provider_id)
        if message_id is None:
            continue
        label_rows.extend({"message_id": message_id, "label_id": lid} for lid in item.label_ids)
        if provider_id in created:  # a stored message's keywords are the mirror's
            keyword_rows.extend(
                {"message_id": message_id, "keyword": k} for k in sorted(set(item.keywords))
            )
        location_rows.extend(
            {
                "message_id": message_id,
                "folder_id": loc.folder_id,
                "uidvalidity": loc.uidvalidity,
                "uid": loc.uid,
                "provider_ref": loc.provider_ref,
            }
            for loc in item.locations
        )
    if label_rows:
        labelled = insert_ignoring_conflicts(
            session,
            MessageLabel,
            label_rows,
            returning=["message_id"],
        )
        new_on_existing = sorted({row[0] for row in labelled if row[0] in existing.values()})
        changelog.record(session, user_id, "Email", new_on_existing, "updated")
        if new_on_existing:
            threads = session.scalars(
                select(Message.thread_id)
                .where(Message.id.in_(new_on_existing), Message.thread_id.is_not(None))
                .distinct()
            ).all()
            changelog.record(session, user_id, "Thread", sorted(t for t in threads if t), "updated")
    if location_rows:
        insert_ignoring_conflicts(session, MessageLocation, location_rows)
    if keyword_rows:
        insert_ignoring_conflicts(session, MessageKeyword, keyword_rows)
