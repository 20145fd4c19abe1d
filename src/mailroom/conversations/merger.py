"""Merging (and, for the subject rescue, re-partitioning) threads.

Merging keeps the older (smaller id) thread. Counters and the label union
follow the moved messages by trigger; the survivor takes the latest snooze
and a pinned category; the newest message decides last-message time and
category at the next refresh (``conversations.refresh``), and the subject
comes from the oldest message, the one the others reply to. The dissolved
threads are reported to JMAP as destroyed and their moved messages as
updated, in the same transaction.

``regroup`` applies a recomputed partition of a set of threads: groups that
span several threads merge (as above), and a group split off a thread gets
the thread its messages' old thread "belongs" to only if it is that
thread's home group (the group holding most of its messages); otherwise it
gets a new thread carrying the old thread's snooze and pinned category.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping

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
        self._carry(survivor, dissolved)
        moved = list(
            self.session.scalars(
                select(Message.id).where(Message.thread_id.in_(dissolved)).order_by(Message.id)
            )
        )
        self.session.execute(
            update(Message).where(Message.thread_id.in_(dissolved)).values(thread_id=survivor)
        )
        self._dissolve(dissolved, moved)
        return survivor, set(dissolved)

    def regroup(
        self, groups: Iterable[Collection[int]], current: Mapping[int, int]
    ) -> tuple[set[int], set[int]]:
        """Make every group (message ids) one thread; returns (touched, dissolved) threads.

        ``current`` maps each message to its thread now; the groups must cover
        every message of every thread named there.
        """
        ordered = [sorted(group) for group in groups if group]
        members: dict[int, list[int]] = defaultdict(list)  # thread -> group indexes, with repeats
        for index, group in enumerate(ordered):
            for message_id in group:
                members[current[message_id]].append(index)
        keepers_of: dict[int, list[int]] = defaultdict(list)  # group index -> threads it keeps
        for thread_id, indexes in members.items():
            counts = Counter(indexes)
            home = min(counts, key=lambda i: (-counts[i], ordered[i][0]))
            keepers_of[home].append(thread_id)
        touched: set[int] = set()
        dissolved: set[int] = set()
        moves: dict[int, list[int]] = defaultdict(list)  # target thread -> messages
        for index, group in enumerate(ordered):
            keepers = sorted(keepers_of.get(index, []))
            if keepers:
                target, merged = keepers[0], keepers[1:]
                if merged:
                    self._carry(target, merged)
                    dissolved.update(merged)
            else:
                origin = Counter(current[m] for m in group).most_common(1)[0][0]
                target = self._split_off(origin)
            if len(keepers) > 1:
                touched.add(target)
            moves[target].extend(m for m in group if current[m] != target)
        moved: list[int] = []
        for target, message_ids in moves.items():
            if message_ids:
                self.session.execute(
                    update(Message).where(Message.id.in_(message_ids)).values(thread_id=target)
                )
                moved.extend(message_ids)
        touched |= {current[m] for m in moved} - dissolved
        touched |= {target for target, message_ids in moves.items() if message_ids}
        self._dissolve(sorted(dissolved), sorted(moved))
        return touched, dissolved

    def _carry(self, survivor: int, dissolved: Collection[int]) -> None:
        """Give the survivor the latest snooze and a pinned category of the dissolved threads."""
        session = self.session
        threads = {
            t.id: t
            for t in session.scalars(
                select(Thread).where(Thread.id.in_([survivor, *dissolved]))
            ).all()
        }
        keep = threads[survivor]
        for thread_id in sorted(dissolved):
            other = threads[thread_id]
            if other.snoozed_until and (
                keep.snoozed_until is None or other.snoozed_until > keep.snoozed_until
            ):
                keep.snoozed_until = other.snoozed_until
            if other.category_pinned and not keep.category_pinned:
                keep.category_pinned, keep.category = True, other.category
        session.flush()

    def _split_off(self, origin: int) -> int:
        """A new thread for messages leaving ``origin``, with its snooze and pinned category."""
        source = self.session.get(Thread, origin)
        thread = Thread(user_id=self.user_id, origin="subject")
        if source is not None:
            thread.snoozed_until = source.snoozed_until
            thread.category_pinned = source.category_pinned
            thread.category = source.category
        self.session.add(thread)
        self.session.flush()
        return thread.id

    def _dissolve(self, dissolved: Collection[int], moved: list[int]) -> None:
        if dissolved:
            self.session.execute(delete(Thread).where(Thread.id.in_(list(dissolved))))
        changelog.record(self.session, self.user_id, "Email", moved, "updated")
        changelog.record(self.session, self.user_id, "Thread", sorted(dissolved), "destroyed")
