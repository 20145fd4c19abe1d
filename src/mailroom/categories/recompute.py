"""Categories from stored data: the backfill, re-sorting after a change, and ``explain``.

Everything here reads only what the store already holds — the headers kept
in ``message_bodies.headers``, the message's labels (a Gmail
``CATEGORY_*`` label is the provider id of a label binding of the message's
account), the owner's correspondents, own addresses and switched-off tabs —
so the decision is the one ingest made, without refetching anything.

The facts (``OwnerContext`` and ``stored_facts``) and ``explain`` live in
:mod:`.explaining`, re-exported here: plain SQL, so that ``mailroom explain``
answers without the ORM from the very facts a recomputation decides on.

``recategorize`` rewrites the message columns that changed and then the
tabs of their threads with ``conversations.refresh.refresh_categories``,
returning only the threads whose tab changed; every caller records those as
JMAP Thread updates (a phone learns about a re-sort that way).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from mailroom.categories.cascade import categorize
from mailroom.categories.correspondents import rebuild_contacts
from mailroom.categories.explaining import Explanation as Explanation  # re-exported
from mailroom.categories.explaining import OwnerContext as OwnerContext  # re-exported
from mailroom.categories.explaining import explain as explain  # re-exported
from mailroom.categories.explaining import stored_facts as stored_facts  # re-exported
from mailroom.conversations.refresh import refresh_categories
from mailroom.crypto.message_fields import open_value, sealed_updates
from mailroom.store import changelog
from mailroom.store.chunks import in_chunks
from mailroom.store.models import Message, Thread


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
        current = {}
        sealed = {}
        for row in session.execute(
            select(
                Message.id,
                Message.category,
                Message.category_stage,
                Message.category_signal,
                Message.thread_id,
                Message.sealed,
            ).where(Message.id.in_(chunk))
        ):
            current[row.id] = (row.category, row.category_stage, row.category_signal, row.thread_id)
            sealed[row.id] = bool(row.sealed)
        rows: list[dict[str, object]] = []
        changed: list[int] = []
        for message_id, fact in facts.items():
            decision = categorize(fact)
            category, stage, signal, thread_id = current[message_id]
            signal = open_value(
                session, user_id, message_id, "category_signal", signal, sealed[message_id]
            )
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
            session.execute(update(Message), sealed_updates(session, user_id, rows))
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
