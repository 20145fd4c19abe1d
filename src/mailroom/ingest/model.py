"""The data a batch is made of, shared by providers, ``ingest.batch`` and the pipeline.

A provider builds :class:`IncomingMessage` values (with their :class:`Location`
rows and the label ids they carry) and hands a sequence of them to
:func:`mailroom.ingest.commit.commit_batch`; storing them yields a
:class:`BatchResult`. Inside the transaction the pipeline stages share one
:class:`Batch`, whose :class:`StoredMessage` entries are the rows this batch
inserted. Nothing here touches the database: these are plain values, so every
module of ``ingest`` (and every provider) can import them without a cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from mailroom.categories.learned import NOTHING_LEARNED, LearnedTabs
from mailroom.mime import ParsedMessage

__all__ = ["Batch", "BatchResult", "IncomingMessage", "Location", "StoredMessage"]


@dataclass(frozen=True, slots=True)
class Location:
    """Where the provider keeps a message: a folder plus UID or a file key."""

    folder_id: int
    uidvalidity: int | None = None
    uid: int | None = None
    provider_ref: str | None = None


@dataclass(slots=True)
class IncomingMessage:
    """One message as a provider hands it over."""

    provider_id: str
    raw: bytes | None
    label_ids: list[int] = field(default_factory=list)
    locations: list[Location] = field(default_factory=list)
    received_at: datetime | None = None  # authoritative arrival time (IMAP INTERNALDATE)
    fallback_time: datetime | None = None  # used when neither headers nor provider know better
    provider_thread_id: str | None = None
    provider_labels: list[str] = field(default_factory=list)
    seen: bool = False
    keywords: list[str] = field(default_factory=list)  # lower-case; not $seen or $flagged
    parsed: ParsedMessage | None = None
    raw_sha256: str | None = None  # the SHA-256 of ``raw`` in hex, when the provider made it


@dataclass
class BatchResult:
    """What storing a batch did."""

    account_id: int
    user_id: int
    created_ids: list[int] = field(default_factory=list)
    duplicate_ids: list[int] = field(default_factory=list)
    repaired: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    thread_ids: set[int] = field(default_factory=set)


@dataclass(slots=True)
class StoredMessage:
    """A message this batch inserted: its id, what the provider gave, what parsing found."""

    message_id: int
    incoming: IncomingMessage
    parsed: ParsedMessage
    raw_sha256: str | None = None  # the key of the raw bytes (``messages.raw_sha256``)
    # The ids it names for threading (``conversations.references.reference_chain``), clear.
    references: list[str] = field(default_factory=list)


@dataclass
class Batch:
    """The state the stages share while processing one batch."""

    session: Session
    account_id: int
    user_id: int
    messages: list[StoredMessage]
    touched_threads: set[int] = field(default_factory=set)
    destroyed_threads: set[int] = field(default_factory=set)
    correspondents: frozenset[str] = frozenset()
    switched_off: frozenset[str] = frozenset()
    owner_addresses: frozenset[str] = frozenset()
    sent_label: int | None = None
    learned: LearnedTabs = NOTHING_LEARNED  # tabs learned from the owner's corrections
    new_correspondents: set[str] = field(default_factory=set)
    # Writes of sealed values still being sealed (``crypto.seal_lane``): of the message rows,
    # made by the ``sealed`` stage before anything reads the batch's rows back; of its body
    # and blob rows by the ``sealed_bulk`` stage, before the first stage that reads those.
    sealed_writes: list[Callable[[], None]] = field(default_factory=list)
    bulk_sealed_writes: list[Callable[[], None]] = field(default_factory=list)

    def sent_by_owner(self, item: StoredMessage) -> bool:
        """Whether the owner sent this message (it is in Sent, or From is an own address)."""
        if self.sent_label is not None and self.sent_label in item.incoming.label_ids:
            return True
        sender = item.parsed.from_[0].email.lower() if item.parsed.from_ else ""
        return bool(sender) and sender in self.owner_addresses
