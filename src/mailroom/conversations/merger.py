"""Merging threads: the older (smaller id) thread survives.

Counters and the label union follow the moved messages by trigger; the
survivor takes the latest snooze and a pinned category; the newest message
decides last-message time and category at the next refresh. The dissolved
threads are reported to JMAP as destroyed and their messages as updated.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from mailroom.store import changelog
from mailroom.store.models import Message, Thread


class ThreadMerger:
    """Folds threads into the oldest of them, announcing what changed."""

    def __init__(self, session: Session, user_id: int) -> None:
        self.session = session
        self.user_id = user_id

    def merge(self, thread_ids: Collection[int]) -> tuple[int, set[int]]:
        """Merge the given threads; returns (survivor, dissolved thread ids)."""
        ordered = sorted(set(thread_ids))
        survivor, dissolved = ordered[0], ordered[1:]
        if not dissolved:
            return survivor, set()
        session = self.session
        threads = {
            t.id: t for t in session.scalars(select(Thread).where(Thread.id.in_(ordered))).all()
        }
        keep = threads[survivor]
        for thread_id in dissolved:
            other = threads[thread_id]
            if other.snoozed_until and (
                keep.snoozed_until is None or other.snoozed_until > keep.snoozed_until
            ):
                keep.snoozed_until = other.snoozed_until
            if other.category_pinned and not keep.category_pinned:
                keep.category_pinned, keep.category = True, other.category
        session.flush()
        moved = session.scalars(
            select(Message.id).where(Message.thread_id.in_(dissolved)).order_by(Message.id)
        ).all()
        session.execute(
            update(Message).where(Message.thread_id.in_(dissolved)).values(thread_id=survivor)
        )
        session.execute(delete(Thread).where(Thread.id.in_(dissolved)))
        changelog.record(session, self.user_id, "Email", moved, "updated")
        changelog.record(session, self.user_id, "Thread", dissolved, "destroyed")
        return survivor, set(dissolved)
