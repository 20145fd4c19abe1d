"""The extension points every mail provider implements, and the provider errors.

A provider (IMAP, Gmail, Graph, local files) is a set of small services, each a
``typing.Protocol`` here, registered by name in :mod:`mailroom.providers.registry`:

* :class:`Syncer` — *sync*: make sure new mail and changes made elsewhere are seen,
  then stop. ``sync(account)`` returns the ids of the folders it touched so the
  caller can schedule follow-up work per folder. Must be idempotent: running it
  twice (or N-fold on several workers) changes nothing the second time.
* :class:`Importer` — *import*: the history of an account, one page per call,
  newest first. ``import_page(account)`` returns whether more work is left. A
  page is idempotent; an interrupted page is simply asked for again.
* :class:`Propagator` — carries the operations outbox (label changes written to
  the database first) to the provider. Replaying it changes nothing.
* :class:`Watcher` — optional live push (IMAP IDLE); ``run()`` blocks until
  ``stop()``.

Errors a provider raises (all :class:`mailroom.errors.ProviderError`, whose text
is one plain sentence for the account owner)::

    ProviderError
    ├── AuthError            credentials refused, host blocked: the account needs
    │                        its owner (status ``auth_error``); do not retry
    ├── TransientError       network, DNS, server hiccup: retry later
    │   └── RateLimitError   the provider asked us to slow down (``retry_after``)
    └── InvalidCursorError   a stored cursor is no longer valid: reset and resync
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from mailroom.errors import ProviderError
from mailroom.store.models import Account

__all__ = [
    "AuthError",
    "ImportState",
    "Importer",
    "InvalidCursorError",
    "Propagator",
    "ProviderError",
    "RateLimitError",
    "Syncer",
    "TransientError",
    "Watcher",
    "failure_reason",
    "failure_status",
]


class AuthError(ProviderError):
    """The provider refused the credentials (or the host is not allowed): the owner must act.

    ``reason`` (optional) is the short cause for the operator's account list, when
    the sentence meant for the owner is deliberately vaguer (see :func:`failure_reason`).
    """

    reason: str | None = None

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class TransientError(ProviderError):
    """A temporary failure (network, DNS, server busy): retry later (``reason`` as AuthError)."""

    reason: str | None = None

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason


class RateLimitError(TransientError):
    """The provider asked to slow down; retry after ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message, reason="the provider asked to slow down")
        self.retry_after = retry_after


class InvalidCursorError(ProviderError):
    """A stored sync cursor is no longer accepted by the provider: reset it and resync."""


def failure_status(error: BaseException) -> str | None:
    """The account status a failure leads to: ``auth_error`` when retrying cannot help.

    Everything else (a transient failure, a missing master key) leaves the status
    alone: the account is tried again, and works once the cause is gone.
    """
    return "auth_error" if isinstance(error, AuthError) else None


def failure_reason(error: BaseException) -> str:
    """Why an account does not sync, for the operator (``Account.status_reason``).

    The owner-facing sentence (``str(error)``) may hide detail on purpose — the
    SSRF guard says the same for a blocked and an unresolvable host — but the
    operator, who reads ``mailroom accounts`` and owns the allow-list, is told
    what is really wrong.
    """
    reason = getattr(error, "reason", None)
    return reason if isinstance(reason, str) and reason else str(error)


@dataclass(frozen=True, slots=True)
class ImportState:
    """Whether an account is still importing its history, and how far it got."""

    importing: bool
    done: int
    total: int
    finished_at: datetime | None = None

    @property
    def percent(self) -> float:
        """Progress in percent (100 when nothing is left)."""
        if not self.importing:
            return 100.0
        if self.total <= 0:
            return 0.0
        return min(100.0, 100.0 * self.done / self.total)


@runtime_checkable
class Syncer(Protocol):
    """New mail and changes made elsewhere; one call, then stop."""

    def supports(self, account: Account) -> bool:
        """Whether this syncer handles the account."""
        ...

    def sync(self, account: Account) -> list[int]:
        """Sync the account; returns the ids of the folders it touched. Idempotent."""
        ...


@runtime_checkable
class Importer(Protocol):
    """The history of an account, one page per call."""

    def supports(self, account: Account) -> bool:
        """Whether this importer handles the account."""
        ...

    def import_page(self, account: Account) -> bool:
        """Import one page; returns True while more history is left. Idempotent."""
        ...

    def state(self, account: Account) -> ImportState:
        """Whether the account is still importing (one query), with progress."""
        ...

    def close(self) -> None:
        """Release what is held between pages (connections); the importer stays usable."""
        ...


@runtime_checkable
class Propagator(Protocol):
    """Carries pending outbox entries (local label changes) to the provider."""

    def supports(self, account: Account) -> bool:
        """Whether this propagator handles the account."""
        ...

    def propagate(self, account: Account) -> int:
        """Propagate what is pending; returns how many entries were acknowledged."""
        ...


@runtime_checkable
class Watcher(Protocol):
    """A live push connection for one account (e.g. IMAP IDLE)."""

    def run(self) -> None:
        """Watch until ``stop()`` is called; raises AuthError or TransientError."""
        ...

    def stop(self) -> None:
        """Ask ``run()`` to end cleanly (thread-safe, returns at once)."""
        ...
