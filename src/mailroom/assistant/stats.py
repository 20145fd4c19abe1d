"""What the admin sees of the hold: median and p95 hold time, shown before the verdict.

A hold's time is ``category_released_at - category_held_at``. "Released before
the verdict" counts the holds that the delayed job or the sweep ended — the
model had not answered (or never did) when the mail appeared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from mailroom.store.reader import Reader, as_reader, stamp, time_parameter

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

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
    source: Reader | Session,
    now: datetime,
    user_id: int | None = None,
    window: timedelta = WINDOW,
) -> HoldStats:
    """The hold figures of the last ``window`` (one owner's, or everyone's).

    Plain SQL through a :class:`~mailroom.store.reader.Reader` (or the same SQL in a
    session), so ``mailroom assistant stats`` starts without SQLAlchemy.
    """
    reader = as_reader(source)
    params: dict[str, Any] = {"since": time_parameter(reader.dialect, now - window)}
    mine = ""
    if user_id is not None:
        mine = " AND user_id = :user"
        params["user"] = user_id
    rows = reader.rows(
        "SELECT category_held_at, category_released_at, assistant_at FROM messages "
        f"WHERE category_held_at IS NOT NULL AND category_held_at >= :since{mine}",
        params,
    )
    durations: list[float] = []
    before = held = 0
    for held_value, released_value, asked_value in rows:
        held_at, released_at, asked_at = map(stamp, (held_value, released_value, asked_value))
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
