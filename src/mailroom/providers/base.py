"""The extension points every mail provider implements, and the provider errors.

A provider (IMAP, Gmail, Graph, local files) is a set of small services, each a
``typing.Protocol`` here, registered by name in :mod:`mailroom.providers.registry`
(the name is ``Account.provider``: dispatch is by that name only). A service is
built from the store and the settings and takes **account ids**, never ORM
objects, so it may be used across sessions, threads and processes:

* :class:`Syncer` — *sync*: make sure new mail and changes made elsewhere are seen,
  then stop. ``sync(account_id)`` returns the ids of the folders it touched so the
  caller can schedule follow-up work per folder. Must be idempotent: running it
  twice (or N-fold on several workers) changes nothing the second time.
* :class:`Importer` — *import*: the history of an account, one page per call,
  newest first. ``import_page(account_id)`` returns whether more work is left. A
  page is idempotent; an interrupted page is simply asked for again.
* :class:`Propagator` — carries pending changes (label changes written to the
  database first) to the provider, a batch of messages per call, and reports an
  :class:`Outcome` per change; :mod:`mailroom.labels.propagation` is the one
  consumer that picks the due changes and keeps their state. Replaying it
  changes nothing. Besides message changes it gets **folder changes** (a
  label created, renamed/moved or destroyed: :data:`FOLDER_OPERATIONS`,
  recognized by :attr:`MessageChanges.folder_label`); a provider without
  folders reports them done.
* :class:`Watcher` — optional live push (IMAP IDLE), built for one account id;
  ``run()`` blocks until ``stop()``.

A provider stores mail only through :func:`mailroom.ingest.commit_batch` and
writes its view of stored mail only through :mod:`mailroom.ingest.mirror`; the
contract suite in ``tests/providers/contract.py`` holds every provider to this.

Errors a provider raises (all :class:`mailroom.errors.ProviderError`, whose text
is one plain sentence for the account owner)::

    ProviderError
    ├── AuthError            credentials refused, host blocked: the account needs
    │                        its owner (status ``auth_error``); do not retry
    ├── TransientError       network, DNS, server hiccup: retry later
    │   └── RateLimitError   the provider asked us to slow down (``retry_after``)
    └── InvalidCursorError   a stored cursor is no longer valid: reset and resync

What each failure does to the account (status, reason, retry) is decided in one
place, :func:`mailroom.providers.errors.account_outcome`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from mailroom.errors import ProviderError

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

__all__ = [
    "CREATE_FOLDER",
    "DELETE_FOLDER",
    "FOLDER_OPERATIONS",
    "RENAME_FOLDER",
    "AuthError",
    "ImportState",
    "Importer",
    "InvalidCursorError",
    "MessageChanges",
    "Outcome",
    "PendingEntry",
    "Propagator",
    "ProviderError",
    "RateLimitError",
    "Syncer",
    "TransientError",
    "Watcher",
    "folder_change_ref",
]


class AuthError(ProviderError):
    """The provider refused the credentials (or the host is not allowed): the owner must act.

    ``reason`` (optional) is the short cause for the operator's account list, when
    the sentence meant for the owner is deliberately vaguer (see
    :func:`mailroom.providers.errors.failure_reason`).
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

    def sync(self, account_id: int) -> list[int]:
        """Sync the account; returns the ids of the folders it touched. Idempotent."""
        ...


@runtime_checkable
class Importer(Protocol):
    """The history of an account, one page per call."""

    def import_page(self, account_id: int) -> bool:
        """Import one page; returns True while more history is left. Idempotent."""
        ...

    def state(self, account_id: int) -> ImportState:
        """Whether the account is still importing (one query), with progress."""
        ...

    def close(self) -> None:
        """Release what is held between pages (connections); the importer stays usable."""
        ...


# Pending changes of a label's provider folder (no message): payload {"label": id}, and for
# a delete also {"folder": folder id, "path": the folder's path}. A propagator derives the
# folder from the label's current path and parent, so replaying one changes nothing.
CREATE_FOLDER = "create_folder"
RENAME_FOLDER = "rename_folder"
DELETE_FOLDER = "delete_folder"
FOLDER_OPERATIONS = frozenset({CREATE_FOLDER, RENAME_FOLDER, DELETE_FOLDER})
FOLDER_REF_PREFIX = "label:"


@dataclass(frozen=True, slots=True)
class PendingEntry:
    """One pending change (a ``pending_changes`` row) as plain values."""

    id: int
    operation: str  # the action's name: star, trash, label, delete, ...
    payload: Mapping[str, Any]  # {"add": [label ids], "remove": [...]}, {"seen": bool}, ...
    attempts: int


@dataclass(frozen=True, slots=True)
class MessageChanges:
    """The due pending changes of one message, oldest first: what a propagator carries.

    ``message_id`` is None once the message was deleted forever (the provider id
    is then all that is left to find it by).
    """

    message_id: int | None
    provider_id: str
    entries: tuple[PendingEntry, ...]

    @property
    def ids(self) -> tuple[int, ...]:
        """The ids of the pending changes."""
        return tuple(entry.id for entry in self.entries)

    @property
    def deleted(self) -> bool:
        """Whether one of the changes deletes the message forever."""
        return any(e.operation == "delete" for e in self.entries)

    @property
    def added_labels(self) -> frozenset[int]:
        """The label ids the pending operations added (trash, spam, inbox moves)."""
        return frozenset(int(x) for e in self.entries for x in e.payload.get("add", []))

    @property
    def folder_label(self) -> int | None:
        """The label whose provider folder these changes create, rename or delete, if they do.

        Folder changes have no message; their ``provider_id`` is ``label:<label id>``
        (:func:`folder_change_ref`) and their operations are :data:`FOLDER_OPERATIONS`.
        """
        if self.message_id is not None or not self.provider_id.startswith(FOLDER_REF_PREFIX):
            return None
        if not all(e.operation in FOLDER_OPERATIONS for e in self.entries):
            return None
        digits = self.provider_id[len(FOLDER_REF_PREFIX) :]
        return int(digits) if digits.isdigit() else None


def folder_change_ref(label_id: int) -> str:
    """The ``provider_id`` of a pending change of a label's provider folder."""
    return f"{FOLDER_REF_PREFIX}{label_id}"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What became of some pending changes; build it with ``done``, ``retry`` or ``lost``.

    * ``done`` — the provider matches the message's current state. ``record``, if
      given, writes the provider's own bookkeeping (IMAP: the new locations from
      COPYUID) in the same transaction that marks the changes done.
    * ``retry`` — the provider refused (or the message has no known place yet):
      costs an attempt, retried after a backoff, ``failed`` after the last.
    * ``lost`` — not carried for a reason that is not the changes' fault (the
      connection broke): no attempt is charged; the next run tries again.
    """

    entry_ids: tuple[int, ...]
    status: Literal["done", "retry", "lost"]
    reason: str = ""
    record: Callable[[Session], None] | None = None

    @classmethod
    def done(
        cls,
        changes: MessageChanges | Iterable[int],
        record: Callable[[Session], None] | None = None,
    ) -> Outcome:
        """The changes reached the provider."""
        return cls(_ids(changes), "done", record=record)

    @classmethod
    def retry(cls, changes: MessageChanges | Iterable[int], reason: str) -> Outcome:
        """The provider refused: charge an attempt."""
        return cls(_ids(changes), "retry", reason)

    @classmethod
    def lost(cls, changes: MessageChanges | Iterable[int], reason: str = "") -> Outcome:
        """Not carried, through no fault of the changes: charge nothing."""
        return cls(_ids(changes), "lost", reason)


def _ids(changes: MessageChanges | Iterable[int]) -> tuple[int, ...]:
    return changes.ids if isinstance(changes, MessageChanges) else tuple(changes)


@runtime_checkable
class Propagator(Protocol):
    """Carries a batch of messages' pending changes to the provider; must be idempotent.

    ``propagate(account_id, batch)`` gets plain values (ids, never ORM objects) and
    yields an :class:`Outcome` for each change as soon as it is settled — one per
    message, or one for a whole provider batch (Gmail ``batchModify``: up to 1,000
    ids with the same labels added and removed; Graph ``$batch``: 20 requests). The
    consumer commits each outcome before asking for the next, so a crash repeats
    only what was not yet reported, which idempotence makes harmless: derive what
    the provider should hold from the message's *current* labels and flags, not
    from the operation names. A change left without an outcome when the iterator
    ends counts as ``lost``; raising ``AuthError`` or ``TransientError`` ends the
    run (nothing charged), any other exception charges the unreported changes an
    attempt. Hold no database session across a ``yield``.
    """

    def propagate(self, account_id: int, batch: Sequence[MessageChanges]) -> Iterator[Outcome]:
        """Carry the batch; yields the outcomes as they are settled."""
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
