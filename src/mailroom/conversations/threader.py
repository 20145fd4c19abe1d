"""The threading cascade: which conversation a new message joins.

Stages, each because the one below is not good enough:

1. ``provider`` — the provider's conversation id (Gmail threadId, Graph
   conversationId) within the same account.
2. ``references`` — RFC 5322 In-Reply-To / References: join the thread of
   any stored message this one names, or that names the same ancestors
   (a parent that never arrived still ties its replies together).
3. (subject rescue lives in ``conversations.subject``, see the
   conversations issue).
4. adoption — stored messages whose In-Reply-To / References name *this*
   message are pulled in, merging their threads into one.

All candidates found are merged (the oldest thread survives), so the final
partition is the connected components of the reference graph: it does not
depend on arrival order or batch boundaries. Messages of the same unflushed
batch are found because every assignment is written with SQL at once (the
"in-memory map" of other designs is the transaction itself).

References considered per message are capped (``ingest.batch.MAX_REFERENCES``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import select, update
from sqlalchemy.orm import Session, aliased

from mailroom.conversations.merger import ThreadMerger
from mailroom.store.models import Message, MessageRef, Thread


@dataclass
class ThreadOutcome:
    """Where a message went and which threads were dissolved on the way."""

    thread_id: int
    origin: str
    destroyed: set[int] = field(default_factory=set)


class Threader:
    """Assigns messages of one user to threads; must be idempotent per message."""

    def __init__(self, session: Session, user_id: int) -> None:
        self.session = session
        self.user_id = user_id
        self.merger = ThreadMerger(session, user_id)

    def assign(self, message_id: int) -> ThreadOutcome:
        """Put the message into its conversation, merging conversations it connects."""
        session = self.session
        message = session.execute(
            select(
                Message.account_id,
                Message.message_id_header,
                Message.provider_thread_id,
                Message.thread_id,
            ).where(Message.id == message_id)
        ).one()
        refs = list(
            session.scalars(select(MessageRef.ref).where(MessageRef.message_id == message_id))
        )
        candidates: set[int] = set()
        origin = "new"
        if message.provider_thread_id:
            found = self._threads_where(
                Message.account_id == message.account_id,
                Message.provider_thread_id == message.provider_thread_id,
                exclude=message_id,
            )
            if found:
                origin = "provider"
            candidates |= found
        names = [*refs, message.message_id_header] if message.message_id_header else refs
        if names:
            found = self._threads_where(Message.message_id_header.in_(names), exclude=message_id)
            found |= self._threads_naming(names, exclude=message_id)
            if found and origin == "new":
                origin = "references"
            candidates |= found
        if message.thread_id is not None:
            candidates.add(message.thread_id)
        if not candidates:
            origin = "references" if refs else "new"
            thread = Thread(user_id=self.user_id, origin=origin)
            session.add(thread)
            session.flush()
            candidates.add(thread.id)
        survivor, destroyed = self.merger.merge(candidates)
        if message.thread_id != survivor:
            session.execute(
                update(Message).where(Message.id == message_id).values(thread_id=survivor)
            )
        return ThreadOutcome(survivor, origin, destroyed)

    def _threads_where(self, *conditions: object, exclude: int) -> set[int]:
        query = select(Message.thread_id).where(
            Message.user_id == self.user_id,
            Message.thread_id.is_not(None),
            Message.id != exclude,
            *conditions,  # type: ignore[arg-type]
        )
        return {tid for tid in self.session.scalars(query.distinct()) if tid is not None}

    def _threads_naming(self, names: list[str], exclude: int) -> set[int]:
        """Threads of stored messages whose references include any of ``names``."""
        other = aliased(Message)
        query = (
            select(other.thread_id)
            .join(MessageRef, MessageRef.message_id == other.id)
            .where(
                MessageRef.ref.in_(names),
                other.user_id == self.user_id,
                other.thread_id.is_not(None),
                other.id != exclude,
            )
            .distinct()
        )
        return {tid for tid in self.session.scalars(query) if tid is not None}
