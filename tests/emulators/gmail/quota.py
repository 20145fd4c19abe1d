"""Per-user quota units per minute, with the per-method costs as swappable profiles.

Google charges every call a number of quota units by method (the quota
reference's table) and refuses a call that would take a user past their units
per minute. The window here slides: a call is refused when the units charged
in the last 60 seconds plus its own cost exceed the limit. A refused call is
not charged. ``burst_per_second`` (off by default) refuses what would spend
more than that many units within one second, the "a minute's supply in a
second" rejection the seed describes.

Two profiles:

* :data:`DOCUMENTED` — 15,000 units/minute (a project that used the API before
  1 May 2026) and Google's published table (messages.get 5).
* :data:`NEW_PROJECT` — 6,000 units/minute (created on or after 1 May 2026) and
  the costs measured in practice (messages.get 20 without content, 60 for
  ``full``/``raw``; threads.get 40).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

DOCUMENTED_COSTS: Mapping[str, int] = {
    "drafts.create": 10,
    "drafts.delete": 10,
    "drafts.get": 5,
    "drafts.list": 5,
    "drafts.send": 100,
    "getProfile": 1,
    "history.list": 2,
    "labels.create": 5,
    "labels.delete": 5,
    "labels.get": 1,
    "labels.list": 1,
    "labels.patch": 5,
    "labels.update": 5,
    "messages.attachments.get": 5,
    "messages.batchDelete": 50,
    "messages.batchModify": 50,
    "messages.delete": 10,
    "messages.get": 5,
    "messages.list": 5,
    "messages.modify": 5,
    "messages.send": 100,
    "messages.trash": 5,
    "messages.untrash": 5,
    "threads.get": 10,
}


@dataclass(frozen=True)
class QuotaProfile:
    """A per-user limit and the cost of each method (``get_costs`` by format overrides)."""

    name: str
    limit_per_minute: int
    costs: Mapping[str, int]
    get_costs: Mapping[str, int] = field(default_factory=dict)  # messages.get by format

    def cost(self, method: str, fmt: str | None = None) -> int:
        """Units one call of ``method`` costs (``fmt``: messages.get's format)."""
        if method == "messages.get" and fmt is not None and fmt in self.get_costs:
            return self.get_costs[fmt]
        return self.costs.get(method, 5)


DOCUMENTED = QuotaProfile("documented", 15_000, DOCUMENTED_COSTS)
NEW_PROJECT = QuotaProfile(
    "new-project",
    6_000,
    {**DOCUMENTED_COSTS, "messages.get": 20, "threads.get": 40},
    {"minimal": 20, "metadata": 20, "full": 60, "raw": 60},
)
PROFILES = {profile.name: profile for profile in (DOCUMENTED, NEW_PROJECT)}


class QuotaMeter:
    """The units one user spent in the sliding minute; thread-safe."""

    WINDOW = 60.0

    def __init__(
        self,
        profile: QuotaProfile = DOCUMENTED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.profile = profile
        self.limit = profile.limit_per_minute
        self.burst_per_second: int | None = None
        self.enforced = True
        self._clock = clock
        self._spent: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()

    def now(self) -> float:
        """The meter's clock (seconds; a benchmark's scaled clock, else monotonic)."""
        return self._clock()

    def _used_since(self, since: float) -> int:
        return sum(units for at, units in self._spent if at > since)

    def used(self) -> int:
        """Units charged in the last minute."""
        with self._lock:
            now = self._clock()
            self._forget(now)
            return self._used_since(now - self.WINDOW)

    def _forget(self, now: float) -> None:
        while self._spent and self._spent[0][0] <= now - self.WINDOW:
            self._spent.popleft()

    def try_charge(self, units: int) -> bool:
        """Charge ``units`` if the limit allows it; False (nothing charged) if not."""
        with self._lock:
            now = self._clock()
            self._forget(now)
            if self.enforced:
                if self._used_since(now - self.WINDOW) + units > self.limit:
                    return False
                burst = self.burst_per_second
                if burst is not None and self._used_since(now - 1.0) + units > burst:
                    return False
            self._spent.append((now, units))
            return True

    def reset(self) -> None:
        """Forget everything spent (a new minute for the tests that need one)."""
        with self._lock:
            self._spent.clear()
