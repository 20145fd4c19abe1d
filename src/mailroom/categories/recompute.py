"""Categories from stored data: the backfill, re-sorting after a change, and ``explain``.

Everything here reads only what the store already holds — the headers kept
in ``message_bodies.headers``, the message's labels (a Gmail
``CATEGORY_*`` label is the provider id of a label binding of the message's
account), the owner's correspondents, own addresses and switched-off tabs —
so the decision is the one ingest made, without refetching anything.

``explain`` (in :mod:`.explaining`, re-exported here) reads the same facts
with plain SQL, so a read command answers it without the ORM.

``recategorize`` rewrites the message columns that changed and then the
tabs of their threads with ``conversations.refresh.refresh_categories``,
returning only the threads whose tab changed; every caller records those as
JMAP Thread updates (a phone learns about a re-sort that way).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from mailroom.categories.cascade import CategoryFacts, categorize
from mailroom.categories.correspondents import (
    correspondents_among,
    owner_addresses,
    rebuild_contacts,
    sent_label_id,
    switched_off,
)
from mailroom.categories.explaining import Explanation as Explanation  # re-exported
from mailroom.categories.explaining import explain as explain  # re-exported
from mailroom.categories.explaining import first_headers
from mailroom.conversations.refresh import refresh_categories
from mailroom.store import changelog
from mailroom.store.chunks import in_chunks
from mailroom.store.headers import stored_headers
from mailroom.store.models import LabelBinding, Message, MessageLabel, Thread


@dataclass(frozen=True, slots=True)
class OwnerContext:
    """What the cascade needs to know about the owner, loaded once per run."""

    addresses: frozenset[str]
    switched_off: frozenset[str]
    sent_label: int | None

    @classmethod
    def load(cls, session: Session, user_id: int) -> OwnerContext:
        """The owner's addresses, switched-off tabs and Sent label id."""
        return cls(
            owner_addresses(session, user_id),
            switched_off(session, user_id),
            sent_label_id(session, user_id),
        )


def stored_facts(
    session: Session, user_id: int, message_ids: Sequence[int], context: OwnerContext
) -> dict[int, CategoryFacts]:
    """The category facts of stored messages, from stored data only."""
    rows = session.execute(
        select(Message.id, Message.account_id, Message.from_email, Message.subject).where(
            Message.user_id + 0 == user_id, Message.id.in_(message_ids)
        )
    ).all()
    headers = stored_headers(session, message_ids)
    labels: dict[int, set[int]] = defaultdict(set)
    provider: dict[int, list[str]] = defaultdict(list)
    for message_id, label_id, ref in session.execute(
        select(MessageLabel.message_id, MessageLabel.label_id, LabelBinding.provider_ref)
        .join(Message, Message.id == MessageLabel.message_id)
        .outerjoin(
            LabelBinding,
            (LabelBinding.label_id == MessageLabel.label_id)
            & (LabelBinding.account_id == Message.account_id),
        )
        .where(MessageLabel.message_id.in_(message_ids))
    ):
        labels[message_id].add(label_id)
        if ref and ref.startswith("CATEGORY_"):
            provider[message_id].append(ref)
    senders = {row.from_email.lower() for row in rows if row.from_email}
    correspondents = correspondents_among(session, user_id, senders)
    facts: dict[int, CategoryFacts] = {}
    for row in rows:
        sender = (row.from_email or "").lower()
        own = sender in context.addresses or (
            context.sent_label is not None and context.sent_label in labels[row.id]
        )
        facts[row.id] = CategoryFacts(
            from_email=row.from_email or "",
            subject=row.subject or "",
            headers=first_headers(headers.get(row.id) or []),
            provider_labels=sorted(provider[row.id]),
            correspondents=correspondents,
            switched_off=context.switched_off,
            is_own_message=own,
        )
    return facts


@dataclass
class RecategorizeResult:
    """What a recomputation changed."""

    messages: int = 0
    changed_messages: int = 0
    changed_threads: list[int] = field(default_factory=list)


def recategorize(
    session: Session, user_id: int, message_ids: Collection[int] | None = None
) -> RecategorizeResult:
    """Recompute the category of these messages (all of the user's if None) and their threads.

    Records a JMAP Email update for each message whose category changed and a
    Thread update for each thread whose tab changed; returns both counts.
    """
    if message_ids is None:
        ids = list(
            session.scalars(
                select(Message.id).where(Message.user_id == user_id).order_by(Message.id)
            )
        )
    else:
        ids = sorted(set(message_ids))
    result = RecategorizeResult(messages=len(ids))
    context = OwnerContext.load(session, user_id)
    threads: set[int] = set()
    for chunk in in_chunks(ids):
        facts = stored_facts(session, user_id, chunk, context)
        current = {
            row.id: (row.category, row.category_stage, row.category_signal, row.thread_id)
            for row in session.execute(
                select(
                    Message.id,
                    Message.category,
                    Message.category_stage,
                    Message.category_signal,
                    Message.thread_id,
                ).where(Message.id.in_(chunk))
            )
        }
        rows: list[dict[str, object]] = []
        changed: list[int] = []
        for message_id, fact in facts.items():
            decision = categorize(fact)
            category, stage, signal, thread_id = current[message_id]
            new = (decision.category, decision.stage, decision.signal[:500])
            if new != (category, stage, signal):
                rows.append(
                    {
                        "id": message_id,
                        "category": new[0],
                        "category_stage": new[1],
                        "category_signal": new[2],
                    }
                )
                changed.append(message_id)
                if thread_id is not None:
                    threads.add(thread_id)
        if rows:
            session.execute(update(Message), rows)
            changelog.record(session, user_id, "Email", changed, "updated")
            result.changed_messages += len(rows)
    if message_ids is None:
        threads = set(session.scalars(select(Thread.id).where(Thread.user_id == user_id)))
    result.changed_threads = refresh_categories(session, sorted(threads))
    changelog.record(session, user_id, "Thread", result.changed_threads, "updated")
    return result


@dataclass
class BackfillResult:
    """What ``backfill_categories`` did."""

    contacts: int
    new_contacts: int
    recategorized: RecategorizeResult


def backfill_categories(session: Session, user_id: int) -> BackfillResult:
    """Recount correspondents and recompute every category and tab from stored data."""
    contacts, added = rebuild_contacts(session, user_id)
    session.flush()
    return BackfillResult(contacts, len(added), recategorize(session, user_id))
