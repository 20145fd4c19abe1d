"""The quota pacer in the store (the embedded mode): two small tables, one lock per account.

``gmail_quota_limits`` holds one account's :class:`~.quota.QuotaState`;
``gmail_quota_usage`` the units it spent per second, pruned to the last minute
on every reservation. Each operation is one short transaction that writes
first (``INSERT … ON CONFLICT DO NOTHING`` creates the limit row), which on
SQLite takes the write lock (``BEGIN IMMEDIATE``) before anything is read, and
on PostgreSQL then reads the row ``FOR UPDATE``: two workers never spend the
same units of one account's minute.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import delete, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from mailroom.providers.gmail.quota import (
    WINDOW_SECONDS,
    Clock,
    PacerBase,
    QuotaState,
    Sleep,
    rejection_usage,
    reservation_wait,
)
from mailroom.store.bulk import insert_ignoring_conflicts
from mailroom.store.engine import Store
from mailroom.store.models import GmailQuotaLimit, GmailQuotaUsage

__all__ = ["StoreQuotaPacer"]


def _stamp(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


def _epoch(stamp: datetime | None) -> float | None:
    return None if stamp is None else stamp.timestamp()


def _state_of(row: GmailQuotaLimit) -> QuotaState:
    return QuotaState(
        learned_limit=row.learned_limit,
        learned_at=_epoch(row.learned_at),
        slowdowns=row.slowdowns,
        last_rejected_at=_epoch(row.last_rejected_at),
        blocked_until=_epoch(row.blocked_until),
    )


def _write_state(row: GmailQuotaLimit, state: QuotaState) -> None:
    row.learned_limit = state.learned_limit
    row.learned_at = _stamp(state.learned_at)
    row.slowdowns = state.slowdowns
    row.last_rejected_at = _stamp(state.last_rejected_at)
    row.blocked_until = _stamp(state.blocked_until)


class StoreQuotaPacer(PacerBase):
    """One account's quota pacer on the store's tables."""

    _storage_errors = (OperationalError,)

    def __init__(
        self,
        store: Store,
        account_id: int,
        clock: Clock | None = None,
        sleep: Sleep | None = None,
    ) -> None:
        super().__init__(account_id, clock, sleep)
        self.store = store

    def _locked_limit(self, session: Session) -> GmailQuotaLimit:
        """The account's limit row, created if missing, locked until the commit."""
        insert_ignoring_conflicts(
            session,
            GmailQuotaLimit,
            [{"account_id": self.account_id, "slowdowns": 0}],
            conflict=["account_id"],
        )
        return session.scalars(
            select(GmailQuotaLimit)
            .where(GmailQuotaLimit.account_id == self.account_id)
            .with_for_update()
        ).one()

    def _usage(self, session: Session, now: float) -> dict[int, int]:
        """The account's usage per second in the minute before ``now``; older rows deleted."""
        session.execute(
            delete(GmailQuotaUsage).where(
                GmailQuotaUsage.account_id == self.account_id,
                GmailQuotaUsage.second <= now - WINDOW_SECONDS,
            )
        )
        rows = session.execute(
            select(GmailQuotaUsage.second, GmailQuotaUsage.units).where(
                GmailQuotaUsage.account_id == self.account_id
            )
        )
        return {int(second): int(units) for second, units in rows}

    def _reserve_at(self, now: float, units: int) -> float:
        with self.store.session() as session:
            state = _state_of(self._locked_limit(session))
            usage = self._usage(session, now)
            wait = reservation_wait(state, usage, units, now)
            if wait > 0 or units == 0:
                return wait
            second = int(now)
            row = session.get(GmailQuotaUsage, (self.account_id, second))
            if row is None:
                session.add(GmailQuotaUsage(account_id=self.account_id, second=second, units=units))
            else:
                row.units += units
            return 0.0

    def _reject_at(self, now: float, units: int, stated_limit: int | None) -> QuotaState:
        with self.store.session() as session:
            row = self._locked_limit(session)
            used = rejection_usage(self._usage(session, now), units, now)
            state = _state_of(row).after_rejection(now, used, stated_limit)
            _write_state(row, state)
            return state

    def _state(self) -> QuotaState:
        with self.store.session() as session:
            row = session.get(GmailQuotaLimit, self.account_id)
            return QuotaState() if row is None else _state_of(row)
