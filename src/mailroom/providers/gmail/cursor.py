"""Where a Gmail account's sync resumes: its ``historyId``, in ``sync_state``.

The stored id only means "incremental sync resumes here", never "the backlog
is complete" (the backfill keeps its own state, :mod:`.backfill`).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.ingest.mirror import insert_for
from mailroom.store.models import SyncState, utcnow

__all__ = ["HISTORY_KEY", "load_history_id", "save_history_id"]

HISTORY_KEY = "gmail.history_id"


def load_history_id(session: Session, account_id: int) -> str | None:
    """The historyId the next sync starts from, or None before the first sync."""
    value = session.scalar(
        select(SyncState.value).where(
            SyncState.account_id == account_id, SyncState.key == HISTORY_KEY
        )
    )
    return str(value) if value else None


def save_history_id(session: Session, account_id: int, history_id: str) -> None:
    """Store where the next sync starts (created or replaced)."""
    insert = insert_for(session, SyncState).values(
        account_id=account_id, key=HISTORY_KEY, value=history_id, updated_at=utcnow()
    )
    session.execute(
        insert.on_conflict_do_update(
            index_elements=["account_id", "key"],
            set_={"value": history_id, "updated_at": utcnow()},
        )
    )
