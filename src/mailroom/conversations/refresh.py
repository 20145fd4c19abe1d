"""Recomputing a thread's derived fields from its messages.

``message_count``, ``unread_count`` and labels are kept by triggers; the
fields here are derived after each batch: last-message time and category
from the newest message (unless the owner pinned the category; a message held
for the assistant's verdict does not count), subject from the oldest message
(the one the others reply to). A sealed message's subject is never copied
(``crypto.message_fields``): the thread's subject is then ``''`` and readers
show the oldest message's opened subject instead.

A message's tab is its rule category when a rule of the owner filed it
(``messages.rule_category``, never touched by recomputation), else its
computed category. ``refresh_categories`` is the statement recomputations
(backfill, a switched tab, a new correspondent) use: it writes only the
threads whose tab changes and returns them, so callers announce exactly
those to JMAP.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from mailroom.categories.tabs import HELD
from mailroom.store.chunks import in_chunks
from mailroom.store.models import Thread

# A message held for the assistant's verdict (mailroom.assistant.hold) does not count:
# a reply held in an existing thread leaves it in its tab, and a thread of held
# messages only is in the HELD "tab", which no tab query lists, until released.
_HELD = "(m.category_held_at IS NOT NULL AND m.category_released_at IS NULL)"
_NEWEST_TAB = f"""COALESCE((SELECT COALESCE(m.rule_category, m.category) FROM messages m
                  WHERE m.thread_id = threads.id AND NOT {_HELD}
                  ORDER BY m.received_at DESC, m.id DESC LIMIT 1),
                 (SELECT '{HELD}' FROM messages m
                  WHERE m.thread_id = threads.id AND {_HELD} LIMIT 1))"""

_REFRESH = text(
    f"""
    UPDATE threads SET
      last_message_at = (SELECT max(m.received_at) FROM messages m WHERE m.thread_id = threads.id),
      subject = COALESCE((SELECT CASE WHEN m.sealed THEN '' ELSE m.subject END
                          FROM messages m WHERE m.thread_id = threads.id
                          ORDER BY m.received_at, m.id LIMIT 1), subject),
      category = CASE WHEN category_pinned THEN category ELSE {_NEWEST_TAB} END
    WHERE id = :id
    """
)

_CHANGED_TABS = f"""
    SELECT threads.id, threads.category, {_NEWEST_TAB} AS tab FROM threads
    WHERE threads.id IN ({{ids}}) AND NOT threads.category_pinned
"""


def never_refreshed(session: Session, thread_ids: Sequence[int]) -> set[int]:
    """The threads among these that were never refreshed: made since the last batch.

    Every thread that receives a message is refreshed at the end of that batch
    (its ``last_message_at`` is then set), so before the refresh a thread
    without one was created by this batch (or emptied and is being reused).
    """
    found: set[int] = set()
    for chunk in in_chunks(sorted(set(thread_ids))):
        found.update(
            session.scalars(
                select(Thread.id).where(Thread.id.in_(chunk), Thread.last_message_at.is_(None))
            )
        )
    return found


def refresh_threads(session: Session, thread_ids: Sequence[int]) -> None:
    """Recompute last-message time, subject and category of these threads."""
    if thread_ids:
        session.execute(_REFRESH, [{"id": thread_id} for thread_id in thread_ids])


def refresh_categories(session: Session, thread_ids: Sequence[int]) -> list[int]:
    """Recompute the tab of these threads; returns (and writes) only those whose tab changed."""
    changed: list[int] = []
    ids = sorted(set(thread_ids))
    for chunk in in_chunks(ids):
        params = {f"t{i}": thread_id for i, thread_id in enumerate(chunk)}
        placeholders = ", ".join(f":{name}" for name in params)
        rows = session.execute(text(_CHANGED_TABS.format(ids=placeholders)), params).all()
        updates = [{"id": tid, "tab": tab} for tid, category, tab in rows if category != tab]
        if updates:
            session.execute(text("UPDATE threads SET category = :tab WHERE id = :id"), updates)
            changed.extend(row["id"] for row in updates)
    return sorted(changed)
