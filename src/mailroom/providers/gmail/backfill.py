"""The Gmail backfill state: where an account's history import is and when it may go on.

The stored ``historyId`` only means "incremental sync resumes here", never
"the backlog is complete" (SPEC §1): the backfill has this state of its own,
one ``gmail_backfills`` row per account. The state machine::

    inbox ──(last inbox page)──▶ mailbox ──(last page)──▶ finished
      │                            │
      └──── failed attempt ────────┴──▶ (wait BACKFILL_COOLDOWN) ... 24th ──▶ abandoned

* ``inbox`` lists ``labelIds=INBOX`` first, so every account has a usable
  inbox before any has its archive; ``mailbox`` then lists the whole mailbox
  with ``includeSpamTrash`` (``messages.list`` leaves spam and trash out
  otherwise, while ``messagesTotal`` counts them). Both page by 500.
* :meth:`BackfillState.next_page` records a page handled: the listing's next
  page token, or the end of the phase. The token lives between jobs, so a
  killed worker resumes at the page it was on (handling a page must be
  idempotent: the store's unique constraints make it so).
* :meth:`BackfillState.failed_attempt` counts a failure and waits
  :data:`BACKFILL_COOLDOWN` (an hour) before the next try, at the same page;
  the :data:`BACKFILL_MAX_ATTEMPTS`-th (24th) failure abandons the backfill.
  The attempts are the backfill's, not a page's: success does not reset them.
* :meth:`BackfillState.deferred` is a quota rejection: the work waits until
  the account's minute is over, and that is no attempt.
* :meth:`BackfillState.restarted` starts over at the inbox (the history
  expired and the backfill window is synced again).

The transitions are pure (a new frozen state each); :func:`load_backfill`
and :func:`save_backfill` move a state in and out of the store, and
:func:`due_backfills` finds the accounts whose backfill may run now.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timedelta

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from mailroom.store.models import GmailBackfill

__all__ = [
    "ABANDONED",
    "BACKFILL_COOLDOWN",
    "BACKFILL_MAX_ATTEMPTS",
    "FINISHED",
    "INBOX",
    "LIST_PAGE_SIZE",
    "MAILBOX",
    "BackfillState",
    "due_backfills",
    "load_backfill",
    "save_backfill",
]

INBOX = "inbox"  # listing the inbox first
MAILBOX = "mailbox"  # then the whole mailbox, spam and trash included
FINISHED = "finished"  # every listed message was stored or skipped
ABANDONED = "abandoned"  # the attempts ran out

BACKFILL_COOLDOWN = timedelta(hours=1)
BACKFILL_MAX_ATTEMPTS = 24
LIST_PAGE_SIZE = 500  # messages.list maxResults
_LIVE = (INBOX, MAILBOX)
# Google's error sentences are kept whole but not without end.
_ERROR_LENGTH = 2_000


@dataclass(frozen=True)
class BackfillState:
    """One account's backfill: phase, page token, failed attempts and when it may go on."""

    phase: str = INBOX
    page_token: str | None = None
    attempts: int = 0
    not_before: datetime | None = None
    last_error: str | None = None
    finished_at: datetime | None = None

    @property
    def done(self) -> bool:
        """Whether the backfill has ended (finished or abandoned)."""
        return self.phase not in _LIVE

    def due(self, now: datetime) -> bool:
        """Whether the backfill may run at ``now`` (not ended, no cooldown or deferral left)."""
        return not self.done and (self.not_before is None or self.not_before <= now)

    def list_params(self) -> dict[str, str]:
        """The ``messages.list`` query parameters of the page to fetch next."""
        params = {"maxResults": str(LIST_PAGE_SIZE)}
        if self.phase == INBOX:
            params["labelIds"] = "INBOX"
        else:
            params["includeSpamTrash"] = "true"
        if self.page_token:
            params["pageToken"] = self.page_token
        return params

    def next_page(self, page_token: str | None, now: datetime) -> BackfillState:
        """The state after a page was handled; ``page_token`` is the listing's next one.

        No next token ends the phase: the inbox gives way to the whole mailbox
        (from its first page), the whole mailbox to ``finished``.
        """
        if self.done:
            return self
        if page_token:
            return replace(self, page_token=page_token, not_before=None)
        if self.phase == INBOX:
            return replace(self, phase=MAILBOX, page_token=None, not_before=None)
        return replace(self, phase=FINISHED, page_token=None, not_before=None, finished_at=now)

    def failed_attempt(self, now: datetime, reason: str) -> BackfillState:
        """The state after a failed attempt: an hour's cooldown, or abandoned at the 24th."""
        if self.done:
            return self
        attempts = self.attempts + 1
        failed = replace(
            self,
            attempts=attempts,
            last_error=reason[:_ERROR_LENGTH],
            not_before=now + BACKFILL_COOLDOWN,
        )
        if attempts >= BACKFILL_MAX_ATTEMPTS:
            return replace(failed, phase=ABANDONED, not_before=None, finished_at=now)
        return failed

    def deferred(self, until: datetime) -> BackfillState:
        """The state after a quota rejection: wait until ``until``, no attempt counted."""
        if self.done:
            return self
        later = until if self.not_before is None else max(until, self.not_before)
        return replace(self, not_before=later)

    def restarted(self) -> BackfillState:
        """A fresh backfill from the inbox's first page (the history expired)."""
        return BackfillState()


def load_backfill(session: Session, account_id: int) -> BackfillState:
    """The account's stored backfill state; a fresh one when none is stored yet."""
    row = session.get(GmailBackfill, account_id)
    if row is None:
        return BackfillState()
    return BackfillState(
        **{field.name: getattr(row, field.name) for field in fields(BackfillState)}
    )


def save_backfill(session: Session, account_id: int, state: BackfillState) -> None:
    """Store ``state`` as the account's backfill (created or replaced; flushed)."""
    row = session.get(GmailBackfill, account_id)
    if row is None:
        row = GmailBackfill(account_id=account_id)
        session.add(row)
    for name, value in asdict(state).items():  # the state's fields are the row's columns
        setattr(row, name, value)
    session.flush()


def due_backfills(session: Session, now: datetime) -> list[int]:
    """The ids of the accounts whose stored backfill may run at ``now``, in id order."""
    rows = session.scalars(
        select(GmailBackfill.account_id)
        .where(
            GmailBackfill.phase.in_(_LIVE),
            or_(GmailBackfill.not_before.is_(None), GmailBackfill.not_before <= now),
        )
        .order_by(GmailBackfill.account_id)
    )
    return list(rows)
