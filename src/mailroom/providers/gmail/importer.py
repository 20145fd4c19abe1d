"""The Gmail importer: the backfill, one listing page per call (SPEC §1, §2).

The backfill has its own state (:mod:`.backfill`): Inbox first, then the whole
mailbox with ``includeSpamTrash``, ``messages.list`` pages of 500 ids. One
:meth:`GmailImporter.import_page`:

1. makes sure the sync cursor exists *before* anything is fetched (a snapshot
   of the mailbox's historyId, so mail arriving during the backfill is the
   next sync's) and that the labels are known;
2. lists the page the state points at and stores its new messages in jobs of
   :data:`JOB_SIZE` (100) ids through :func:`.intake.take_in` — raw bytes in
   batch requests of 5, through the quota pacer; stored and skipped ids are
   not fetched again, so a page is idempotent and a killed worker simply
   handles its page again;
3. moves the state to the next page (or phase), and when the backfill ends
   sets ``Account.import_finished_at`` (the read path's "still importing").

A quota rejection defers the backfill to the end of the account's minute (no
attempt counted) and raises the :class:`RateLimitError` that says how long;
any other transient failure costs an attempt and an hour's cooldown, the 24th
abandons the backfill. While the backfill waits, ``import_page`` says there is
nothing to do now (False) and the account stays importing.
"""

from __future__ import annotations

from contextlib import closing
from datetime import datetime, timedelta

from sqlalchemy import func, select, update

from mailroom.config import Settings
from mailroom.errors import ProviderError
from mailroom.providers.base import AuthError, ImportState, RateLimitError
from mailroom.providers.gmail.backfill import (
    INBOX,
    LIST_PAGE_SIZE,
    BackfillState,
    load_backfill,
    save_backfill,
)
from mailroom.providers.gmail.changes import read_labels
from mailroom.providers.gmail.connection import GmailAccount, open_account
from mailroom.providers.gmail.cursor import load_history_id, save_history_id
from mailroom.providers.gmail.errors import QuotaExceededError
from mailroom.providers.gmail.intake import take_in
from mailroom.providers.gmail.quota import SYSTEM_TIME, TimeSource
from mailroom.store.engine import Store
from mailroom.store.models import Account, GmailBackfill, Message

__all__ = ["JOB_SIZE", "GmailImporter", "mark_importing", "snapshot"]

JOB_SIZE = 100  # ids fetched and stored per job


def mark_importing(store: Store, account_id: int, finished_at: datetime | None) -> None:
    """Keep ``Account.import_finished_at`` in step with the backfill."""
    with store.session() as session:
        session.execute(
            update(Account).where(Account.id == account_id).values(import_finished_at=finished_at)
        )


def snapshot(store: Store, gmail: GmailAccount, *, restart: bool) -> None:
    """Store the mailbox's current historyId as the sync cursor, before any fetch.

    ``restart``: the history expired; the backfill starts over from the Inbox.
    """
    history_id = str(gmail.api.profile()["historyId"])
    with store.session() as session:
        save_history_id(session, gmail.account_id, history_id)
        state = load_backfill(session, gmail.account_id)
        save_backfill(session, gmail.account_id, state.restarted() if restart else state)
    if restart:
        mark_importing(store, gmail.account_id, None)


class GmailImporter:
    """The backfill of Gmail accounts, one listing page per call.

    ``time`` is the clock of the backfill's deferrals and of the quota pacer
    (the real one; a benchmark runs both faster on one scaled clock).
    """

    def __init__(
        self, store: Store, settings: Settings | None = None, time: TimeSource = SYSTEM_TIME
    ) -> None:
        self.store = store
        self.settings = settings
        self.time = time

    def _now(self) -> datetime:
        return self.time.clock()

    def import_page(self, account_id: int) -> bool:
        """Handle the backfill's next page; True while more pages are left."""
        with self.store.session() as session:
            state = load_backfill(session, account_id)
            has_cursor = load_history_id(session, account_id) is not None
        if state.done or not state.due(self._now()):
            return False
        with closing(open_account(self.store, self.settings, account_id, self.time)) as gmail:
            try:
                if not has_cursor:
                    snapshot(self.store, gmail, restart=False)
                read_labels(self.store, gmail)
                state = self._page(gmail, state)
            except QuotaExceededError as exc:
                self._defer(account_id, gmail.deferral(exc))
            except RateLimitError as exc:
                self._defer(account_id, exc)
            except AuthError:
                raise
            except ProviderError as exc:
                self._save(account_id, state.failed_attempt(self._now(), str(exc)))
                raise
        return not state.done

    def _page(self, gmail: GmailAccount, state: BackfillState) -> BackfillState:
        page = gmail.api.list_messages(
            label_ids=["INBOX"] if state.phase == INBOX else (),
            include_spam_trash=state.phase != INBOX,
            page_size=LIST_PAGE_SIZE,
            page_token=state.page_token,
        )
        ids = [str(ref["id"]) for ref in page.messages]
        for start in range(0, len(ids), JOB_SIZE):
            intake = take_in(self.store, gmail, ids[start : start + JOB_SIZE])
            if intake.deferral is not None:
                raise intake.deferral
            if intake.failure is not None:
                raise intake.failure
        after = state.next_page(page.next_page_token, self._now())
        self._save(gmail.account_id, after)
        return after

    def _defer(self, account_id: int, error: RateLimitError) -> None:
        with self.store.session() as session:
            state = load_backfill(session, account_id)
            until = self._now() + timedelta(seconds=error.retry_after or 60.0)
            save_backfill(session, account_id, state.deferred(until))
        raise error

    def _save(self, account_id: int, state: BackfillState) -> None:
        with self.store.session() as session:
            save_backfill(session, account_id, state)
        if state.done:
            mark_importing(self.store, account_id, state.finished_at or self._now())

    def state(self, account_id: int) -> ImportState:
        """Whether the backfill is still going, with the messages stored so far."""
        with self.store.session() as session:
            row = session.execute(
                select(GmailBackfill.phase, GmailBackfill.finished_at).where(
                    GmailBackfill.account_id == account_id
                )
            ).one_or_none()
            done = int(
                session.scalar(
                    select(func.count(Message.id)).where(Message.account_id == account_id)
                )
                or 0
            )
        if row is None:
            return ImportState(importing=True, done=done, total=0)
        finished = BackfillState(phase=row.phase).done
        return ImportState(
            importing=not finished,
            done=done,
            total=done if finished else 0,
            finished_at=row.finished_at,
        )

    def close(self) -> None:
        """Nothing is held between pages (each page opens its own client)."""
