"""What the admin sees of the hold: median and p95 hold time, shown before the verdict.

A hold's time is ``category_released_at - category_held_at``. "Released before
the verdict" counts the holds that the delayed job or the sweep ended — the
model had not answered (or never did) when the mail appeared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.store.models import Message

WINDOW = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class HoldStats:
    """Hold times of the released holds in a window, and how many are held now."""

    released: int
    held_now: int
    median_seconds: float | None
    p95_seconds: float | None
    before_verdict: int

    @property
    def before_verdict_share(self) -> float | None:
        """The share of released holds that ended before the model answered."""
        return self.before_verdict / self.released if self.released else None


def _percentile(ordered: list[float], share: float) -> float:
    """Nearest-rank percentile of an ordered, non-empty list."""
    rank = min(max(math.ceil(share * len(ordered)), 1), len(ordered))
    return ordered[rank - 1]


def hold_stats(
    session: Session, now: datetime, user_id: int | None = None, window: timedelta = WINDOW
) -> HoldStats:
    """The hold figures of the last ``window`` (one owner's, or everyone's)."""
    query = select(
        Message.category_held_at, Message.category_released_at, Message.assistant_at
    ).where(Message.category_held_at.is_not(None), Message.category_held_at >= now - window)
    if user_id is not None:
        query = query.where(Message.user_id == user_id)
    durations: list[float] = []
    before = held = 0
    for held_at, released_at, asked_at in session.execute(query):
        if held_at is None or released_at is None:
            held += 1
            continue
        durations.append(max((released_at - held_at).total_seconds(), 0.0))
        if asked_at is None or asked_at > released_at:
            before += 1
    durations.sort()
    return HoldStats(
        released=len(durations),
        held_now=held,
        median_seconds=_percentile(durations, 0.5) if durations else None,
        p95_seconds=_percentile(durations, 0.95) if durations else None,
        before_verdict=before,
    )
