"""Where other code plugs into sending: the lane wakers and the after-sent hooks.

``WAKERS``: called once after a transaction that queued (or re-queued)
submissions *commits* — never on rollback, never inside the transaction —
with each touched lane and the earliest moment one of its new submissions is
due. The job runtime registers its enqueuer here (as ``labels.propagation``
has its wakers); the runtime's periodic duty is only the safety net.

``AFTER_SENT``: called with the store and a submission id after that
submission was committed as ``sent`` (filing the Sent copy, ...). A hook must
be idempotent — a later sweep or an operator may call it again — and its
failure is logged by the sender, never raised into the lane.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime

from sqlalchemy import event
from sqlalchemy.orm import Session, SessionTransaction

from mailroom.store.engine import Store

__all__ = ["AFTER_SENT", "WAKERS", "AfterSent", "Waker", "wake_after_commit"]

log = logging.getLogger(__name__)

# lane -> the earliest due moment among the submissions queued in the transaction.
Waker = Callable[[Mapping[str, datetime]], None]
WAKERS: list[Waker] = []

AfterSent = Callable[[Store, int], None]
AFTER_SENT: list[AfterSent] = []

_TOUCHED = "mailroom.outbound_lanes"


def wake_after_commit(session: Session, lane: str, due: datetime) -> None:
    """Have ``lane``'s job woken for ``due`` once the session's transaction commits."""
    touched: dict[str, datetime] = session.info.setdefault(_TOUCHED, {})
    touched[lane] = min(due, touched.get(lane, due))


@event.listens_for(Session, "after_commit")
def _after_commit(session: Session) -> None:
    """The transaction committed: tell every waker, once, which lanes it touched."""
    if session.in_nested_transaction():
        return  # a savepoint was released: the transaction itself may still roll back
    touched: dict[str, datetime] | None = session.info.pop(_TOUCHED, None)
    if not touched:
        return
    for waker in list(WAKERS):
        try:
            waker(dict(touched))
        except Exception:  # the commit stands; the runtime's duty catches up
            log.exception("Waking the sending lanes %s failed", sorted(touched))


@event.listens_for(Session, "after_transaction_end")
def _after_transaction_end(session: Session, transaction: SessionTransaction) -> None:
    """A top-level transaction that ended without a commit (rollback) wakes nobody."""
    if transaction.parent is None:
        session.info.pop(_TOUCHED, None)
