"""The IDLE watcher: new mail in the inbox becomes visible without waiting for the poll.

``ImapWatcher(store, account_id).run()`` blocks: it logs in, catches the inbox up
(a sync limited to the inbox), SELECTs it and sits in IDLE (RFC 2177). When the
server reports EXISTS, EXPUNGE, FETCH or VANISHED it leaves IDLE, syncs the inbox
on the same connection, and goes back to IDLE.

* IDLE is re-issued every ``renew_after`` seconds (default 25 minutes): servers may
  drop a connection idle for 30 minutes, and RFC 2177 asks clients to re-issue at
  least every 29 (values of 29 minutes or more are refused).
* ``stop()`` is thread-safe and returns at once; ``run()`` notices within
  ``poll_interval`` seconds, ends IDLE with DONE, logs out and returns.
* ``Account.watch_state`` is ``watching`` while ``run()`` holds the connection and
  back to ``idle`` when it returns, whatever the reason. A refused login marks the
  account ``auth_error`` and raises :class:`AuthError`; a dropped connection raises
  :class:`TransientError`. Reconnecting with backoff, leases and the reconciliation
  poll are the supervisor's job (the watch is a latency optimisation; the poll is
  the correctness anchor, and the dedup makes their overlap harmless).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import select, update

from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.labels.resolver import system_label
from mailroom.providers.imap.connection import ImapConnection
from mailroom.providers.imap.gmail_ext import watched_folder
from mailroom.providers.imap.login import account_connection
from mailroom.providers.imap.syncer import sync_account
from mailroom.store.engine import Store
from mailroom.store.models import Account, Folder

__all__ = ["CATCH_UP", "RENEW_AFTER", "ImapWatcher", "interesting"]

log = logging.getLogger(__name__)

RENEW_AFTER = 25 * 60.0
RFC_LIMIT = 29 * 60.0
_EVENTS = {b"EXISTS", b"EXPUNGE", b"FETCH", b"VANISHED", b"RECENT"}
CATCH_UP: tuple[object, ...] = ("catch up first",)  # a status no SELECT returns


def interesting(responses: list[tuple[Any, ...]]) -> bool:
    """Whether IDLE responses tell of a change in the folder (new, gone or changed mail)."""
    for response in responses:
        for item in response:
            if isinstance(item, bytes) and item.upper() in _EVENTS:
                return True
    return False


class ImapWatcher:
    """IDLE on one account's inbox (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        account_id: int,
        *,
        settings: Settings | None = None,
        renew_after: float = RENEW_AFTER,
        poll_interval: float = 1.0,
        on_change: Callable[[ImapConnection, int], None] | None = None,
    ) -> None:
        if not 0 < renew_after < RFC_LIMIT:
            raise ConfigError("IDLE must be re-issued within 29 minutes (RFC 2177).")
        self.store = store
        self.account_id = account_id
        self.settings = settings
        self.renew_after = renew_after
        self.poll_interval = poll_interval
        self.on_change = on_change
        self.idles = 0  # how many times IDLE was (re-)issued
        self.syncs = 0
        self._stop = threading.Event()
        self.running = threading.Event()

    def stop(self) -> None:
        """Ask ``run()`` to end cleanly (thread-safe, returns at once)."""
        self._stop.set()

    def _watch_state(self, state: str) -> None:
        with self.store.session() as session:
            session.execute(
                update(Account).where(Account.id == self.account_id).values(watch_state=state)
            )

    def _watched(self) -> tuple[int, str] | None:
        """The inbox folder, or All Mail for Gmail (where new mail is synced from)."""
        with self.store.session() as session:
            gmail = watched_folder(session, self.account_id)
            if gmail is not None:
                return gmail
            user_id = session.scalars(
                select(Account.user_id).where(Account.id == self.account_id)
            ).one()
            inbox_label = system_label(session, user_id, "inbox").id
            row = session.execute(
                select(Folder.id, Folder.path).where(
                    Folder.account_id == self.account_id, Folder.label_id == inbox_label
                )
            ).first()
        return (int(row[0]), str(row[1])) if row is not None else None

    def _inbox(self, conn: ImapConnection) -> tuple[int, str]:
        found = self._watched()
        if found is None:  # never synced: discover folders and set the marks first
            sync_account(self.store, self.account_id, settings=self.settings, connection=conn)
            found = self._watched()
        if found is None:
            raise ConfigError("The account has no inbox folder to watch.")
        return found

    def _sync_inbox(self, conn: ImapConnection, folder_id: int) -> None:
        self.syncs += 1
        if self.on_change is not None:
            self.on_change(conn, folder_id)
        else:
            sync_account(
                self.store,
                self.account_id,
                settings=self.settings,
                connection=conn,
                folders=[folder_id],
            )

    def _settle(
        self, conn: ImapConnection, folder_id: int, path: str, seen: tuple[object, ...]
    ) -> tuple[object, ...]:
        """SELECT and sync until the folder stands still; returns its status to IDLE on.

        ``seen`` is the status at the last SELECT (``CATCH_UP`` at first): a difference
        means a change outside IDLE (before the first IDLE, between DONE and IDLE, during
        a sync).
        """
        while not self._stop.is_set():
            status = conn.select(path, readonly=True)
            now = (status.uidvalidity, status.uidnext, status.exists, status.highest_modseq)
            if now == seen:
                break
            seen = now
            self._sync_inbox(conn, folder_id)
        return seen

    def _idle_once(self, conn: ImapConnection) -> bool:
        """One IDLE, until a change, the renewal time or stop(); True when something changed."""
        conn.idle()
        self.idles += 1
        started = time.monotonic()
        changed = False
        try:
            while not self._stop.is_set():
                remaining = self.renew_after - (time.monotonic() - started)
                if remaining <= 0:
                    break
                if interesting(conn.idle_check(min(self.poll_interval, remaining))):
                    changed = True
                    break
        finally:
            if not conn.closed:
                changed = interesting(conn.idle_done()) or changed
        return changed and not self._stop.is_set()

    def run(self) -> None:
        """Watch the inbox until ``stop()``; see the module docstring."""
        if self._stop.is_set():
            return
        with account_connection(self.store, self.account_id, settings=self.settings) as conn:
            self._watch_state("watching")
            try:
                self.running.set()
                folder_id, path = self._inbox(conn)
                seen: tuple[object, ...] = CATCH_UP
                while not self._stop.is_set():
                    seen = self._settle(conn, folder_id, path, seen)
                    if not self._stop.is_set() and self._idle_once(conn):
                        self._sync_inbox(conn, folder_id)
            finally:
                self.running.clear()
                self._watch_state("idle")
