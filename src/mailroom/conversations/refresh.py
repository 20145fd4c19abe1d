"""Recomputing a thread's derived fields from its messages.

``message_count``, ``unread_count`` and labels are kept by triggers; the
fields here are derived after each batch: last-message time and category
from the newest message (unless the owner pinned the category), subject from
the oldest message (the one the others reply to).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import text
from sqlalchemy.orm import Session

_REFRESH = text(
    """
    UPDATE threads SET
      last_message_at = (SELECT max(m.received_at) FROM messages m WHERE m.thread_id = threads.id),
      subject = COALESCE((SELECT m.subject FROM messages m WHERE m.thread_id = threads.id
                          ORDER BY m.received_at, m.id LIMIT 1), subject),
      category = CASE WHEN category_pinned THEN category ELSE
                 (SELECT m.category FROM messages m WHERE m.thread_id = threads.id
                  ORDER BY m.received_at DESC, m.id DESC LIMIT 1) END
    WHERE id = :id
    """
)


def refresh_threads(session: Session, thread_ids: Sequence[int]) -> None:
    """Recompute last-message time, subject and category of these threads."""
    if thread_ids:
        session.execute(_REFRESH, [{"id": thread_id} for thread_id in thread_ids])
