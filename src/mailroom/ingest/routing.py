"""Where follow-up work for stored mail goes: routed by the mail, not by the work.

* ``enrich_live``    — mail of accounts that finished importing (new mail: fast lane)
* ``enrich``         — recent mail (received within 30 days) of an importing account
* ``enrich_backlog`` — old mail from an import

When in doubt an account counts as still importing, so a backlog never
crowds the live lane.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.store.models import Account, utcnow

RECENT = timedelta(days=30)
LIVE, RECENT_QUEUE, BACKLOG = "enrich_live", "enrich", "enrich_backlog"


def account_finished_importing(session: Session, account_id: int) -> bool:
    """True only when the account's import is known to be finished."""
    finished = session.scalar(select(Account.import_finished_at).where(Account.id == account_id))
    return finished is not None


def every_account_imported(session: Session, user_id: int) -> bool:
    """True only when each of the user's accounts is known to have finished importing."""
    waiting = session.scalar(
        select(Account.id)
        .where(Account.user_id == user_id, Account.import_finished_at.is_(None))
        .limit(1)
    )
    return waiting is None


def queue_for(finished_importing: bool, received_at: datetime, now: datetime | None = None) -> str:
    """The follow-up queue for one message."""
    if finished_importing:
        return LIVE
    if received_at >= (now or utcnow()) - RECENT:
        return RECENT_QUEUE
    return BACKLOG
