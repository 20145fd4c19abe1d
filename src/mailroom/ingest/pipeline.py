"""The post-ingest pipeline: an ordered list of named stages run on a flushed batch.

Precondition: the batch's messages are inserted and flushed (ids exist, the
search index sees them). Per message, in order: ``sanitize`` (bodies; the raw
HTML is kept next to the sanitized copy), ``raw`` (the original bytes, when
the provider handed them over), ``created`` (the JMAP change; the thread is
not known yet), ``categorize``, ``thread`` (a threading failure is noted on
the message and never costs the batch). Then once per batch: ``rules``,
``flush``, ``thread_changes`` (one "updated" per touched thread),
``flush``.

Each stage has a name and one method; the list is ``PIPELINE``.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from sqlalchemy import insert, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from mailroom.categories import CategoryFacts, categorize
from mailroom.mime import ParsedMessage
from mailroom.store import changelog
from mailroom.store.models import Blob, Message, MessageBody

if TYPE_CHECKING:
    from mailroom.ingest.batch import IncomingMessage

log = logging.getLogger(__name__)


@dataclass(slots=True)
class StoredMessage:
    """A message this batch inserted: its id, what the provider gave, what parsing found."""

    message_id: int
    incoming: IncomingMessage
    parsed: ParsedMessage


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


class Stage(Protocol):
    """One named stage of the pipeline."""

    name: str

    def run(self, batch: Batch) -> None:
        """Do this stage's work for the whole batch."""


class SanitizeStage:
    """Store text, raw HTML and sanitized HTML, headers and attachment metadata."""

    name = "sanitize"

    def run(self, batch: Batch) -> None:
        rows = [
            {
                "message_id": item.message_id,
                "text_body": item.parsed.text_body,
                "html_body": item.parsed.html_body,
                "sanitized_html": item.parsed.sanitized_html,
                "headers": [[name, value] for name, value in item.parsed.headers],
                "attachments": [
                    {
                        "filename": a.filename,
                        "content_type": a.content_type,
                        "size": a.size,
                        "content_id": a.content_id,
                        "disposition": a.disposition,
                        "part": a.part_path,
                    }
                    for a in item.parsed.attachments
                ],
            }
            for item in batch.messages
        ]
        if rows:
            batch.session.execute(insert(MessageBody), rows)


class RawStage:
    """Keep the original bytes, content-addressed, when the provider gave them."""

    name = "raw"

    def run(self, batch: Batch) -> None:
        blobs: dict[str, bytes] = {}
        hashes: list[dict[str, object]] = []
        for item in batch.messages:
            raw = item.incoming.raw
            if raw is None:
                continue
            digest = hashlib.sha256(raw).hexdigest()
            blobs[digest] = raw
            hashes.append({"id": item.message_id, "raw_sha256": digest})
        if not blobs:
            return
        values = [{"sha256": d, "size": len(b), "data": b} for d, b in blobs.items()]
        dialect = batch.session.get_bind().dialect.name
        stmt = (sqlite if dialect == "sqlite" else postgresql).insert(Blob).values(values)
        batch.session.execute(stmt.on_conflict_do_nothing())
        batch.session.execute(update(Message), hashes)


class CreatedChangeStage:
    """Record the JMAP "created" change of every new message."""

    name = "created"

    def run(self, batch: Batch) -> None:
        changelog.record(
            batch.session,
            batch.user_id,
            "Email",
            [item.message_id for item in batch.messages],
            "created",
        )


class CategorizeStage:
    """Decide each message's inbox tab from its stored headers and labels."""

    name = "categorize"

    def run(self, batch: Batch) -> None:
        rows = []
        for item in batch.messages:
            decision = categorize(facts_for(item.parsed, item.incoming.provider_labels, batch))
            rows.append(
                {
                    "id": item.message_id,
                    "category": decision.category,
                    "category_stage": decision.stage,
                    "category_signal": decision.signal[:500],
                }
            )
        if rows:
            batch.session.execute(update(Message), rows)


def facts_for(parsed: ParsedMessage, provider_labels: list[str], batch: Batch) -> CategoryFacts:
    """The category facts of a freshly parsed message."""
    headers: dict[str, str] = {}
    for name, value in parsed.headers:
        headers.setdefault(name.lower(), value)
    return CategoryFacts(
        from_email=parsed.from_[0].email if parsed.from_ else "",
        subject=parsed.subject,
        headers=headers,
        provider_labels=provider_labels,
        correspondents=batch.correspondents,
        switched_off=batch.switched_off,
    )


class ThreadStage:
    """Assign every new message to a conversation (see ``conversations.threader``)."""

    name = "thread"

    def run(self, batch: Batch) -> None:
        from mailroom.conversations.threader import Threader

        threader = Threader(batch.session, batch.user_id)
        for item in sorted(batch.messages, key=lambda m: m.message_id):
            try:
                with batch.session.begin_nested():
                    outcome = threader.assign(item.message_id)
            except Exception as exc:  # one message's threading must never cost the batch
                log.exception("Threading message %s failed", item.message_id)
                batch.session.execute(
                    update(Message)
                    .where(Message.id == item.message_id)
                    .values(thread_note=f"threading failed: {exc}"[:1000])
                )
                continue
            batch.touched_threads.add(outcome.thread_id)
            batch.touched_threads -= outcome.destroyed
            batch.destroyed_threads |= outcome.destroyed


class FlushStage:
    """Flush pending ORM state so the next stage's SQL sees it."""

    name = "flush"

    def run(self, batch: Batch) -> None:
        batch.session.flush()


class ThreadChangesStage:
    """Refresh derived thread fields and record one "updated" per touched thread."""

    name = "thread_changes"

    def run(self, batch: Batch) -> None:
        from mailroom.conversations.refresh import refresh_threads

        touched = sorted(batch.touched_threads)
        refresh_threads(batch.session, touched)
        changelog.record(batch.session, batch.user_id, "Thread", touched, "updated")


PIPELINE: list[Stage] = [
    SanitizeStage(),
    RawStage(),
    CreatedChangeStage(),
    CategorizeStage(),
    ThreadStage(),
    FlushStage(),
    ThreadChangesStage(),
    FlushStage(),
]


def run_pipeline(batch: Batch, stages: list[Stage] | None = None) -> None:
    """Run every stage in order on a flushed batch."""
    for stage in stages if stages is not None else PIPELINE:
        stage.run(batch)
