"""Fetching Gmail messages and storing them: the one path new mail takes, sync or import.

:func:`take_in` gets Gmail ids and stores the ones mailroom does not have yet:

* ids already stored, or in the skipped ledger, are not fetched again (so an
  import run twice fetches and doubles nothing);
* the rest are fetched ``format=raw`` in multipart batches of
  :data:`~mailroom.providers.gmail.quota.MESSAGES_PER_REQUEST` (5) messages,
  each batch charged to the quota pacer before it is sent;
* every batch is stored through :func:`mailroom.ingest.commit_batch` with its
  labels (:mod:`.labels`), read/starred state, ``CATEGORY_*`` and ``IMPORTANT``
  as provider labels for the tab, and Gmail's ``threadId`` as the provider
  thread id (stage 1 of threading);
* chats and ids that answer 404 go to the skipped ledger (:mod:`.skipped`);
* a message whose delivery headers give a linked account of the owner the
  better claim, and which that account already holds, is not stored again: its
  id goes to the ledger as ``linked`` (Gmailify, :mod:`.gmailify`; no pipeline);
* a quota rejection — of the whole request, or of parts inside a 200 batch —
  stops the intake: what was fetched is stored, the rest is returned as
  ``deferred`` together with the :class:`RateLimitError` that defers it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.parser import BytesHeaderParser
from email.policy import compat32

from sqlalchemy.orm import Session

from mailroom.errors import ProviderError
from mailroom.ingest.commit import commit_batch
from mailroom.ingest.mirror import known_messages
from mailroom.ingest.model import IncomingMessage
from mailroom.providers.base import RateLimitError
from mailroom.providers.gmail.api import decode_raw
from mailroom.providers.gmail.connection import GmailAccount
from mailroom.providers.gmail.errors import QuotaExceededError
from mailroom.providers.gmail.gmailify import linked_entry, linked_rows, siblings_of
from mailroom.providers.gmail.labels import CHAT, STARRED, UNREAD, LabelMap, load_label_map
from mailroom.providers.gmail.quota import message_requests
from mailroom.providers.gmail.resources import Message as GmailMessage
from mailroom.providers.gmail.skipped import (
    ADDRESS_HEADERS,
    NOT_FOUND,
    SkippedEntry,
    forget_skipped,
    record_skipped,
    skipped_ids,
)
from mailroom.providers.gmail.skipped import CHAT as CHAT_KIND
from mailroom.store.engine import Store

__all__ = ["Intake", "new_ids", "take_in"]


@dataclass
class Intake:
    """What an intake did: ids stored, skipped, deferred by the quota, and the deferral."""

    stored: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)
    deferral: RateLimitError | None = None
    failure: ProviderError | None = None


def new_ids(session: Session, account_id: int, gmail_ids: Sequence[str]) -> list[str]:
    """The ids neither stored nor in the skipped ledger, in the given order, each once."""
    ids = list(dict.fromkeys(gmail_ids))
    done = set(known_messages(session, account_id, ids)) | skipped_ids(session, account_id, ids)
    return [i for i in ids if i not in done]


def _received(message: GmailMessage) -> datetime | None:
    millis = message.get("internalDate")
    try:
        return datetime.fromtimestamp(int(str(millis)) / 1000, UTC) if millis else None
    except ValueError:
        return None


def _incoming(message: GmailMessage, raw: bytes, labels: LabelMap) -> IncomingMessage:
    gmail_labels = frozenset(message.get("labelIds", []))
    label_ids = labels.labels_for(gmail_labels)
    if STARRED in gmail_labels:
        label_ids.add(labels.starred)
    return IncomingMessage(
        provider_id=str(message["id"]),
        raw=raw,
        label_ids=sorted(label_ids),
        received_at=_received(message),
        provider_thread_id=message.get("threadId") or None,
        provider_labels=sorted(gmail_labels),
        seen=UNREAD not in gmail_labels,
    )


def _address_headers(raw: bytes) -> dict[str, str]:
    headers = BytesHeaderParser(policy=compat32).parsebytes(raw, headersonly=True)
    return {name: str(headers[name]) for name in ADDRESS_HEADERS if headers[name] is not None}


def _chat(message: GmailMessage, raw: bytes | None) -> SkippedEntry:
    return SkippedEntry(
        provider_id=str(message["id"]),
        kind=CHAT_KIND,
        reason="a chat message: mail has no place for it",
        label_ids=list(message.get("labelIds", [])),
        headers=_address_headers(raw) if raw else {},
    )


def _not_found(gmail_id: str) -> SkippedEntry:
    return SkippedEntry(gmail_id, NOT_FOUND, "Gmail listed the message but answered 404")


def take_in(store: Store, gmail: GmailAccount, gmail_ids: Sequence[str]) -> Intake:
    """Fetch and store the new ones of ``gmail_ids`` (see the module docstring)."""
    intake = Intake()
    with store.session() as session:
        todo = new_ids(session, gmail.account_id, gmail_ids)
        labels = load_label_map(session, gmail.account_id, gmail.user_id)
        siblings = siblings_of(session, gmail.user_id, gmail.account_id)
    requests = message_requests(todo)
    for number, chunk in enumerate(requests):
        try:
            result = gmail.api.get_messages(chunk, "raw", batch_size=len(chunk))
        except QuotaExceededError as exc:
            intake.deferral = gmail.deferral(exc)
            intake.deferred = [i for rest in requests[number:] for i in rest]
            return intake
        items: list[IncomingMessage] = []
        skipped = [_not_found(i) for i in result.missing]
        raws: dict[str, bytes] = {}
        for message in result.messages.values():
            try:
                raw = decode_raw(message)
            except ProviderError as exc:
                intake.failure = intake.failure or exc
                continue
            if CHAT in message.get("labelIds", []):
                skipped.append(_chat(message, raw))
            else:
                raws[str(message["id"])] = raw
                items.append(_incoming(message, raw, labels))
        if siblings and raws:
            with store.session() as session:
                linked = linked_rows(session, gmail.user_id, siblings, raws)
            skipped += [linked_entry(i, sibling.name) for i, (sibling, _row) in linked.items()]
            items = [item for item in items if item.provider_id not in linked]
        _store(store, gmail, items, skipped)
        intake.stored += [i.provider_id for i in items]
        intake.skipped += [s.provider_id for s in skipped]
        limited = result.rate_limited
        for gmail_id, error in result.failed.items():
            if gmail_id not in limited:
                intake.failure = intake.failure or error
        if limited:
            first = result.failed[limited[0]]
            assert isinstance(first, QuotaExceededError | RateLimitError)
            stated = first.stated_limit if isinstance(first, QuotaExceededError) else None
            intake.deferral = gmail.deferral(
                QuotaExceededError(str(first), first.retry_after, stated)
            )
            intake.deferred = limited + [i for rest in requests[number + 1 :] for i in rest]
            return intake
    return intake


def _store(
    store: Store, gmail: GmailAccount, items: list[IncomingMessage], skipped: list[SkippedEntry]
) -> None:
    now = datetime.now(UTC)

    def bookkeeping(session: Session) -> None:
        if skipped:
            record_skipped(session, gmail.account_id, skipped, now)
        if items:
            forget_skipped(session, gmail.account_id, [i.provider_id for i in items])

    if items:
        commit_batch(store, gmail.account_id, gmail.user_id, items, before=bookkeeping)
    elif skipped:
        with store.session() as session:
            bookkeeping(session)
