"""The IMAP sync and import marks of each folder, and "is this account still importing".

A first import is not a sync. Per folder (``Folder.uidvalidity`` plus the JSON
``Folder.state``) two marks split the UID space::

        history (importer)          handled           new mail (syncer)
    1 ─────────────────────── F ─────────────── L ──────────────────── *
                       import_floor_uid    last_seen_uid

State machine and invariants:

* **First contact** (the folder has no UIDVALIDITY yet): ``L = UIDNEXT - 1`` (the
  top of the folder) and ``F = L + 1``. Nothing is fetched: everything already
  there is history.
* **Sync** fetches UIDs above ``L`` in ascending pages of 50 and moves ``L`` up
  past each page, then stops. It never walks into the history.
* **Import** asks the server which UIDs exist below ``F``, takes the highest 50
  that are not stored in this folder yet (a message already there is never
  fetched twice), stores them and lowers ``F`` to the lowest of them. When no
  UID is left below ``F``, ``F = 1``: the folder's history is done.
* **Failures cost one message.** A message that cannot be fetched or stored is
  counted in ``failures[uid]``; the page is retried and the marks stop just short
  of it. On its 5th failed attempt the message goes to the skipped ledger
  (``SkippedMessage``, with the reason), its UID to ``given_up``, and the marks
  move past it.
* Some servers answer a message they cannot read by closing the connection (Dovecot
  sends BYE), which looks like a network failure. So a page whose connection broke
  sets ``careful``: the next attempt fetches and stores that folder's page one UID
  at a time, and a break then is counted against that one UID. A careful page that
  completes clears the flag.
* Invariant: ``F <= L + 1``, and every UID in ``[F, L]`` has been handled (stored,
  recognised and re-located, skipped after 5 attempts, or found expunged).
* **UIDVALIDITY change**: the folder's locations are re-mapped by Message-ID and
  size from an envelope scan (nothing already stored is downloaded again), then
  the marks restart as on first contact; what was not recognised is history.
* ``highest_modseq`` is the HIGHESTMODSEQ seen at the SELECT of the last finished
  change scan; the next scan asks ``CHANGEDSINCE`` it.
* A folder that cannot hold messages (``\\Noselect``) has ``F = 1`` and no ``L``.

"Is this account still importing" (SPEC's ``InitialImportState``) is one query:
yes while no folder has been discovered yet, or any folder has no ``F`` yet or
``F > 1``. When in doubt, an account counts as importing. ``Account.import_finished_at``
is kept in step with that answer (:func:`mark_import`, in every transaction that changes
folders or their marks), for readers that do not import this provider.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import exists, or_, select, update
from sqlalchemy.orm import Session

from mailroom.providers.base import ImportState
from mailroom.store.models import Account, Folder, utcnow

__all__ = ["MAX_ATTEMPTS", "PAGE_SIZE", "FolderMarks", "import_state", "mark_import"]

PAGE_SIZE = 50
MAX_ATTEMPTS = 5


@dataclass
class FolderMarks:
    """The marks of one folder, read from and written to ``Folder.state``."""

    last_seen_uid: int | None = None
    import_floor_uid: int | None = None
    highest_modseq: int | None = None
    failures: dict[int, int] = field(default_factory=dict)
    given_up: set[int] = field(default_factory=set)
    careful: bool = False

    @classmethod
    def of(cls, folder: Folder) -> FolderMarks:
        """The marks stored on ``folder``."""
        state = folder.state or {}

        def _int(key: str) -> int | None:
            value = state.get(key)
            return int(value) if value is not None else None

        failures = {int(k): int(v) for k, v in (state.get("failures") or {}).items()}
        return cls(
            _int("last_seen_uid"),
            _int("import_floor_uid"),
            _int("highest_modseq"),
            failures,
            {int(u) for u in state.get("given_up") or ()},
            bool(state.get("careful", False)),
        )

    def save(self, folder: Folder, **extra: Any) -> None:
        """Write the marks back (a new dict, so the JSON column is seen as changed)."""
        state = dict(folder.state or {})
        floor, last = self.import_floor_uid or 1, self.last_seen_uid or 0
        # A given-up UID matters until both marks are past it.
        self.given_up = {u for u in self.given_up if not floor <= u <= last}
        state.update(
            last_seen_uid=self.last_seen_uid,
            import_floor_uid=self.import_floor_uid,
            highest_modseq=self.highest_modseq,
            failures={str(k): v for k, v in sorted(self.failures.items())},
            given_up=sorted(self.given_up),
            careful=self.careful,
        )
        state.update(extra)
        folder.state = state

    @property
    def importing(self) -> bool:
        """Whether history is left below the floor."""
        return self.import_floor_uid is None or self.import_floor_uid > 1

    def fail(self, uid: int) -> int:
        """Count one more failed attempt for ``uid``; returns the attempts so far."""
        self.failures[uid] = self.failures.get(uid, 0) + 1
        return self.failures[uid]

    def clear(self, uids: set[int] | list[int]) -> None:
        """Forget the failures of UIDs that are handled now."""
        for uid in uids:
            self.failures.pop(uid, None)


def import_state(session: Session, account_id: int) -> ImportState:
    """Whether the account is still importing, with its progress — one query."""
    return _read_state(session, account_id)[0]


def mark_import(session: Session, account_id: int) -> bool:
    """Whether the account is still importing, with ``Account.import_finished_at`` in step.

    The mark is what readers that do not import this provider go by
    (:mod:`mailroom.providers.facts`): set when no history is left, cleared when
    some is. Called in each transaction that changes the folders or their marks,
    so the two agree whenever it commits; it writes only when the mark changes.
    """
    state, finished_at = _read_state(session, account_id)
    if state.importing != (finished_at is None):
        session.execute(
            update(Account)
            .where(Account.id == account_id)
            .values(import_finished_at=None if state.importing else utcnow())
        )
    return state.importing


def _read_state(session: Session, account_id: int) -> tuple[ImportState, datetime | None]:
    """The import state and the stored ``import_finished_at`` mark, in one query."""
    floor = Folder.state["import_floor_uid"].as_integer()
    work = (
        exists()
        .where(Folder.account_id == Account.id, or_(floor.is_(None), floor > 1))
        .correlate(Account)
    )
    discovered = exists().where(Folder.account_id == Account.id).correlate(Account)
    row = session.execute(
        select(
            Account.import_done,
            Account.import_total,
            Account.import_finished_at,
            work.label("work"),
            discovered.label("discovered"),
        ).where(Account.id == account_id)
    ).one_or_none()
    if row is None:
        return ImportState(importing=False, done=0, total=0), None
    importing = bool(row.work) or not bool(row.discovered)
    state = ImportState(
        importing=importing,
        done=int(row.import_done or 0),
        total=int(row.import_total or 0),
        finished_at=None if importing else row.import_finished_at,
    )
    return state, row.import_finished_at
