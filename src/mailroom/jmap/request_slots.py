"""Per-user counts of things running at once (requests, push streams), each with a limit.

API requests over HTTP and over WebSocket (RFC 8887) share one
:class:`RequestSlots`, so a client cannot exceed ``maxConcurrentRequests`` by
using both.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

from mailroom.jmap.errors import LIMIT, Problem


class UserSlots:
    """At most ``per_user`` at once per user; the next one raises ``refusal(per_user)``."""

    def __init__(self, per_user: int, refusal: Callable[[int], Problem]) -> None:
        self.per_user = per_user
        self._refusal = refusal
        self._open: Counter[int] = Counter()
        self._lock = threading.Lock()

    def take(self, user_id: int) -> None:
        """Count one more for the user, or raise the refusal problem."""
        with self._lock:
            if self._open[user_id] >= self.per_user:
                raise self._refusal(self.per_user)
            self._open[user_id] += 1

    def give_back(self, user_id: int) -> None:
        """One of the user's has ended."""
        with self._lock:
            self._open[user_id] -= 1
            if self._open[user_id] <= 0:
                del self._open[user_id]


def _too_many_requests(most: int) -> Problem:
    return Problem(
        LIMIT,
        429,
        f"More than maxConcurrentRequests ({most}) requests at once.",
        limit="maxConcurrentRequests",
    )


class RequestSlots(UserSlots):
    """Running API requests per user (``maxConcurrentRequests``)."""

    def __init__(self, per_user: int) -> None:
        super().__init__(per_user, _too_many_requests)
