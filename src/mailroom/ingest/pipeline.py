"""The post-ingest pipeline: an ordered list of named stages run on a flushed batch.

Precondition: the batch's messages are inserted and flushed (ids exist, the
search index sees them). Per message, in order: ``sanitize`` (bodies; the raw
HTML is kept next to the sanitized copy), ``raw`` (the original bytes, when
the provider handed them over), ``created`` (the JMAP change; the thread is
not known yet), ``owner`` (the owner's addresses and switched-off tabs),
``sealed`` (sealed mail: the sealed values of the batch's message rows,
sealed meanwhile, written before any stage reads the rows back), ``harvest``
(recipients of mail the owner sent become correspondents, before anything
is categorized, so a reply in the same batch already counts),
``categorize``, ``thread`` (stages 1, 2 and 4 per message, a failure noted
on the message and never costing the batch; then the subject rescue once
for the batch), ``sealed_bulk`` (sealed mail: the bodies and raw bytes,
sealed meanwhile). Then once per batch: ``rules`` (one query per rule, after
threading so archive and trash reach whole conversations), ``hold`` (mail
the assistant's verdict could still change waits for it in no tab),
``wake_on_reply``, ``flush``,
``thread_changes`` (derived fields and one "updated" per touched thread),
``flush``.

Each stage has a name and one method; the list is ``PIPELINE``.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from sqlalchemy import select, update

from mailroom.categories import CategoryFacts, categorize
from mailroom.categories.correspondents import (
    SentMessage,
    correspondents_among,
    harvest,
    learned_tabs,
    owner_addresses,
    senders_by_address,
    sent_label_id,
    switched_off,
)
from mailroom.conversations.subject import is_reply
from mailroom.crypto.mail_writing import seal_blob_rows, seal_body_rows
from mailroom.crypto.message_fields import sealed_updates
from mailroom.crypto.sealing import sealing_cipher
from mailroom.ingest.model import Batch
from mailroom.mime import ParsedMessage
from mailroom.store import changelog
from mailroom.store.bulk import insert_ignoring_conflicts, insert_rows, update_by_id
from mailroom.store.models import Blob, Message, MessageBody, Thread, utcnow

log = logging.getLogger(__name__)


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
                "headers": item.parsed.headers,  # (name, value) pairs: JSON arrays
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
        if not rows:
            return
        cipher = sealing_cipher(batch.session)
        if cipher is None:
            insert_rows(batch.session, MessageBody, rows)
            return
        sealed_rows = seal_body_rows(cipher, batch.user_id, rows)
        batch.bulk_sealed_writes.append(
            lambda: insert_rows(batch.session, MessageBody, sealed_rows())
        )


class RawStage:
    """Keep the original bytes, content-addressed, when the provider gave them.

    The message row already names its blob (``raw_sha256`` is set on insert, in
    the same transaction); this stage stores the bytes once per digest. Sealed
    mail's key is the owner's keyed hash of the digest (``ingest.batch``) and
    its bytes are sealed under that key (``crypto.mail_writing``), in the
    import's sealing lane if there is one, and written by the ``sealed_bulk`` stage.
    """

    name = "raw"

    def run(self, batch: Batch) -> None:
        blobs: dict[str, bytes] = {}
        for item in batch.messages:
            if item.raw_sha256 is not None and item.incoming.raw is not None:
                blobs[item.raw_sha256] = item.incoming.raw
        if not blobs:
            return
        now = utcnow()
        rows = [
            {"sha256": d, "size": len(b), "data": b, "user_id": None, "created_at": now}
            for d, b in blobs.items()
        ]
        cipher = sealing_cipher(batch.session)
        if cipher is None:
            insert_ignoring_conflicts(batch.session, Blob, rows)
            return
        sealed_rows = seal_blob_rows(cipher, batch.user_id, rows)

        def write() -> None:
            insert_ignoring_conflicts(batch.session, Blob, sealed_rows())

        batch.bulk_sealed_writes.append(write)


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


class OwnerStage:
    """Load what the later stages need to know about the owner."""

    name = "owner"

    def run(self, batch: Batch) -> None:
        session = batch.session
        batch.owner_addresses = owner_addresses(session, batch.user_id)
        batch.switched_off = switched_off(session, batch.user_id)
        batch.learned = learned_tabs(session, batch.user_id)
        batch.sent_label = sent_label_id(session, batch.user_id)


class HarvestStage:
    """Count the recipients of mail the owner sent as correspondents; load the batch's ones.

    When an address becomes a correspondent, the owner's stored mail from it
    is sorted again (``categories.recompute``), so the tab of a message does
    not depend on whether the owner's reply arrived before or after it.
    """

    name = "harvest"

    def run(self, batch: Batch) -> None:
        session = batch.session
        sent = [
            SentMessage(
                [a.email for a in (*item.parsed.to, *item.parsed.cc, *item.parsed.bcc)],
                item.parsed.date or item.incoming.received_at,
            )
            for item in batch.messages
            if batch.sent_by_owner(item)
        ]
        batch.new_correspondents = harvest(session, batch.user_id, sent, batch.owner_addresses)
        senders = {item.parsed.from_[0].email for item in batch.messages if item.parsed.from_}
        batch.correspondents = correspondents_among(session, batch.user_id, senders)
        if batch.new_correspondents:
            from mailroom.categories.recompute import recategorize

            ours = {item.message_id for item in batch.messages}
            earlier = {
                message_id
                for ids in senders_by_address(
                    session, batch.user_id, batch.new_correspondents
                ).values()
                for message_id in ids
                if message_id not in ours
            }
            if earlier:
                recategorize(session, batch.user_id, earlier)  # announces changed tabs itself


class CategorizeStage:
    """Decide each message's inbox tab from its stored headers and labels."""

    name = "categorize"

    def run(self, batch: Batch) -> None:
        rows = []
        for item in batch.messages:
            facts = facts_for(
                item.parsed, item.incoming.provider_labels, batch, batch.sent_by_owner(item)
            )
            decision = categorize(facts)
            rows.append(
                {
                    "id": item.message_id,
                    "category": decision.category,
                    "category_stage": decision.stage,
                    "category_signal": decision.signal[:500],
                }
            )
        update_by_id(batch.session, Message, sealed_updates(batch.session, batch.user_id, rows))


def facts_for(
    parsed: ParsedMessage, provider_labels: list[str], batch: Batch, own: bool = False
) -> CategoryFacts:
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
        is_own_message=own,
        owner_addresses=batch.owner_addresses,
        learned=batch.learned,
        text_body=parsed.text_body,
        html_body=parsed.html_body,
    )


class SealedWritesStage:
    """Write the batch's sealed message columns, sealed meanwhile (``crypto.seal_lane``).

    Before ``harvest``, the first stage that reads the owner's rows back (and with
    them the batch's): the stages before it work from the parsed mail, while an
    import's sealing lane seals.
    """

    name = "sealed"

    def run(self, batch: Batch) -> None:
        for write in batch.sealed_writes:
            write()
        batch.sealed_writes.clear()


class BulkSealedWritesStage:
    """Write the batch's sealed bodies and raw bytes, once the batch is threaded.

    ``harvest``, ``categorize`` and ``thread`` work from the parsed mail and the
    message rows, never the batch's own bodies or blobs; ``rules`` reads the
    stored headers (a sender's authentication). So the sealing lane has those
    stages' time to seal the bulk of the bytes, still in the batch's transaction.
    """

    name = "sealed_bulk"

    def run(self, batch: Batch) -> None:
        for write in batch.bulk_sealed_writes:
            write()
        batch.bulk_sealed_writes.clear()


class ThreadStage:
    """Assign every new message to a conversation (``conversations.threader``, ``.rescue``).

    Stages 1, 2 and 4 run for the whole batch at once (``BatchThreader``);
    should that fail, they run per message, each in a savepoint: a failure
    is noted on that message (``thread_note``) and the others carry on. The
    subject rescue then runs once for the batch, also in a savepoint; if it
    fails, the batch keeps the threads the references gave and the failure
    is noted on the batch's reply-prefixed messages.
    """

    name = "thread"

    def run(self, batch: Batch) -> None:
        from mailroom.conversations.rescue import SubjectRescue
        from mailroom.conversations.threader import BatchThreader, id_forms_of

        session = batch.session
        chains = [(item.parsed, item.references) for item in batch.messages]
        forms = id_forms_of(session, batch.user_id, chains)
        threader = BatchThreader(session, batch.user_id, forms)
        threaded: list[int] = []
        merged: set[int] = set()
        ids = sorted(item.message_id for item in batch.messages)
        try:
            with session.begin_nested():
                outcomes = threader.assign_batch(ids)
        except Exception:  # fall back to one message at a time, each failure costing itself
            log.exception("Batch threading failed; threading message by message")
            outcomes = {}
        for message_id in ids:
            outcome = outcomes.get(message_id)
            if outcome is None:
                try:
                    with session.begin_nested():
                        outcome = threader.assign(message_id)
                except Exception as exc:  # one message's threading must never cost the batch
                    log.exception("Threading message %s failed", message_id)
                    self._note(batch, [message_id], f"threading failed: {exc}")
                    continue
            threaded.append(message_id)
            batch.touched_threads.add(outcome.thread_id)
            batch.touched_threads -= outcome.destroyed
            batch.destroyed_threads |= outcome.destroyed
            merged -= outcome.destroyed
            if outcome.destroyed:
                merged.add(outcome.thread_id)
        if not threaded:
            return
        try:
            with session.begin_nested():
                known = _clear_facts(batch) if sealing_cipher(session) is not None else None
                rescue = SubjectRescue(session, batch.user_id, batch.owner_addresses, forms, known)
                result = rescue.run(threaded, merged)
        except Exception as exc:  # the rescue must never cost the batch either
            log.exception("Subject rescue failed for a batch of user %s", batch.user_id)
            replies = [m.message_id for m in batch.messages if is_reply(m.parsed.subject)]
            self._note(batch, replies, f"subject threading failed: {exc}")
            return
        batch.touched_threads |= result.touched
        batch.touched_threads -= result.destroyed
        batch.destroyed_threads |= result.destroyed

    @staticmethod
    def _note(batch: Batch, message_ids: list[int], note: str) -> None:
        if message_ids:
            batch.session.execute(
                update(Message).where(Message.id.in_(message_ids)).values(thread_note=note[:1000])
            )


def _clear_facts(batch: Batch) -> dict[int, dict[str, Any]]:
    """The subject, sender and recipients of the batch's messages, as their rows hold them."""
    return {
        item.message_id: {
            "subject": item.parsed.subject,
            "from_email": item.parsed.from_[0].email if item.parsed.from_ else "",
            "recipients": {
                "to": [[a.name, a.email] for a in item.parsed.to],
                "cc": [[a.name, a.email] for a in item.parsed.cc],
            },
        }
        for item in batch.messages
    }


class RulesStage:
    """Apply the owner's rules: one query per rule, actions on whole threads (``rules``)."""

    name = "rules"

    def run(self, batch: Batch) -> None:
        from mailroom.rules.engine import apply_rules

        outcome = apply_rules(
            batch.session, batch.user_id, [item.message_id for item in batch.messages]
        )
        batch.touched_threads |= outcome.threads - batch.destroyed_threads


class HoldStage:
    """Hold new mail the assistant's verdict could still change (``assistant.hold``).

    After the rules (a rule that files the mail decides it) and before the
    threads' tabs are derived, which leave held messages out.
    """

    name = "hold"

    def run(self, batch: Batch) -> None:
        from mailroom.assistant.hold import hold_new_mail

        candidates = [item.message_id for item in batch.messages if not batch.sent_by_owner(item)]
        hold_new_mail(
            batch.session, batch.user_id, batch.account_id, candidates, utcnow(), batch.switched_off
        )


class WakeOnReplyStage:
    """A reply from someone else arriving in a snoozed thread wakes it early."""

    name = "wake_on_reply"

    def run(self, batch: Batch) -> None:
        from mailroom.labels.operations import Operations

        ids = [item.message_id for item in batch.messages if not batch.sent_by_owner(item)]
        if not ids:
            return
        snoozed = sorted(
            set(
                batch.session.scalars(
                    select(Thread.id)
                    .join(Message, Message.thread_id == Thread.id)
                    .where(Message.id.in_(ids), Thread.snoozed_until.is_not(None))
                )
            )
        )
        if snoozed:
            Operations(batch.session, batch.user_id).wake(snoozed)
            batch.touched_threads.update(snoozed)


class FlushStage:
    """Flush pending ORM state so the next stage's SQL sees it."""

    name = "flush"

    def run(self, batch: Batch) -> None:
        batch.session.flush()


class ThreadChangesStage:
    """Refresh derived thread fields; log each touched thread "created" if new, else "updated"."""

    name = "thread_changes"

    def run(self, batch: Batch) -> None:
        from mailroom.conversations.refresh import never_refreshed, refresh_threads

        touched = sorted(batch.touched_threads)
        new = never_refreshed(batch.session, touched)
        refresh_threads(batch.session, touched)
        session, user_id = batch.session, batch.user_id
        old = [t for t in touched if t not in new]
        changelog.record(session, user_id, "Thread", [t for t in touched if t in new], "created")
        changelog.record(session, user_id, "Thread", old, "updated")


PIPELINE: list[Stage] = [
    SanitizeStage(),
    RawStage(),
    CreatedChangeStage(),
    OwnerStage(),
    SealedWritesStage(),
    HarvestStage(),
    CategorizeStage(),
    ThreadStage(),
    BulkSealedWritesStage(),
    RulesStage(),
    HoldStage(),
    WakeOnReplyStage(),
    FlushStage(),
    ThreadChangesStage(),
    FlushStage(),
]


def run_pipeline(batch: Batch, stages: list[Stage] | None = None) -> None:
    """Run every stage in order on a flushed batch."""
    for stage in stages if stages is not None else PIPELINE:
        stage.run(batch)
