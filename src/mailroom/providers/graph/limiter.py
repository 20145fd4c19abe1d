"""At most four requests in flight per mailbox, across threads.

Exchange Online allows an application four concurrent requests per mailbox and
answers a fifth with ``429 ApplicationThrottled`` (MailboxConcurrency). A
:class:`MailboxLimiter` holds one semaphore per mailbox key (the account id);
every Graph request of that mailbox holds a slot while it is on the wire (never
while waiting out a ``Retry-After``). Clients of one account share
:data:`SHARED_LIMITER` unless given their own, so several clients in several
threads of one process stay under the limit together. A ``$batch`` is one
request here, as it is one HTTP request.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager

__all__ = ["MAILBOX_CONCURRENCY", "SHARED_LIMITER", "MailboxLimiter"]

MAILBOX_CONCURRENCY = 4


class MailboxLimiter:
    """A counting limit per mailbox key; thread-safe."""

    def __init__(self, limit: int = MAILBOX_CONCURRENCY) -> None:
        if limit < 1:
            raise ValueError("the limit must be at least 1")
        self.limit = limit
        self._lock = threading.Lock()
        self._slots: dict[Hashable, threading.BoundedSemaphore] = {}

    def _semaphore(self, key: Hashable) -> threading.BoundedSemaphore:
        with self._lock:
            semaphore = self._slots.get(key)
            if semaphore is None:
                semaphore = self._slots[key] = threading.BoundedSemaphore(self.limit)
            return semaphore

    @contextmanager
    def slot(self, key: Hashable) -> Iterator[None]:
        """Hold one of the mailbox's slots for the duration of the block (waits if none)."""
        semaphore = self._semaphore(key)
        semaphore.acquire()
        try:
            yield
        finally:
            semaphore.release()


SHARED_LIMITER = MailboxLimiter()
