"""The Gmail syncer: labels first, then the ``historyId`` delta (SPEC §1).

One :meth:`GmailSyncer.sync`:

1. **labels** — Gmail's label list into labels, bindings and label folders
   (:func:`.labels.sync_labels`), so every label a message names exists;
2. **first contact** — no stored historyId: the mailbox's current one is read
   (``getProfile``) *before* anything is fetched and stored as the cursor, and
   the backfill is started; the backfill brings the history, the next sync
   everything that happened after the snapshot;
3. **delta** — ``history.list`` from the cursor to its end:
   ``messagesAdded`` of unknown ids are fetched and stored (:mod:`.intake`),
   ``messagesDeleted`` delete the stored message, ``labelsAdded`` /
   ``labelsRemoved`` (and adds of ids already stored) only mirror the label ids
   the record carries (:mod:`.mirror`) — no body is fetched for a label change;
4. the cursor moves to the last page's ``historyId`` — unless the quota
   deferred part of the work: then it stays (replaying is harmless) and the
   sync raises :class:`RateLimitError` with the wait;
5. **expired history** — ``history.list`` answers 404
   (:class:`InvalidCursorError`): a new snapshot becomes the cursor, the
   labels of the stored messages are read again from per-label listings
   (:mod:`.resync`), and the backfill starts over to bring what the gap hid.
   The account is never marked failed for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass, field

from mailroom.config import Settings
from mailroom.providers.base import InvalidCursorError
from mailroom.providers.gmail.changes import delete_stored, read_labels, store_states
from mailroom.providers.gmail.connection import GmailAccount, open_account
from mailroom.providers.gmail.cursor import load_history_id, save_history_id
from mailroom.providers.gmail.errors import QuotaExceededError
from mailroom.providers.gmail.importer import snapshot
from mailroom.providers.gmail.intake import take_in
from mailroom.providers.gmail.resources import HistoryRecord
from mailroom.providers.gmail.resync import resync_labels
from mailroom.store.engine import Store

__all__ = ["Delta", "GmailSyncer"]


@dataclass
class Delta:
    """What a run of history records says, per message, in the records' order."""

    added: list[str] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)
    labels: dict[str, frozenset[str]] = field(default_factory=dict)

    def read(self, records: Iterable[HistoryRecord]) -> None:
        """Fold records in (ascending ids: the last word about a message wins)."""
        for record in records:
            for change in record.get("messagesAdded", []):
                self._seen(change["message"], added=True)
            for key in ("labelsAdded", "labelsRemoved"):
                for change in record.get(key, []):  # type: ignore[attr-defined]
                    self._seen(change["message"], added=False)
            for change in record.get("messagesDeleted", []):
                gmail_id = str(change["message"]["id"])
                self.deleted.add(gmail_id)
                self.labels.pop(gmail_id, None)

    def _seen(self, message: object, *, added: bool) -> None:
        assert isinstance(message, dict)
        gmail_id = str(message["id"])
        self.deleted.discard(gmail_id)
        if added and gmail_id not in self.added:
            self.added.append(gmail_id)
        if "labelIds" in message:
            self.labels[gmail_id] = frozenset(message["labelIds"])


class GmailSyncer:
    """New mail and changes made in Gmail, one call at a time (see the module docstring)."""

    def __init__(self, store: Store, settings: Settings | None = None) -> None:
        self.store = store
        self.settings = settings

    def sync(self, account_id: int) -> list[int]:
        """Sync the account; Gmail has no folders to report, so the list is empty."""
        with closing(open_account(self.store, self.settings, account_id)) as gmail:
            try:
                self._sync(gmail)
            except QuotaExceededError as exc:
                raise gmail.deferral(exc) from None
        return []

    def _sync(self, gmail: GmailAccount) -> None:
        read_labels(self.store, gmail)
        with self.store.session() as session:
            cursor = load_history_id(session, gmail.account_id)
        if cursor is None:
            snapshot(self.store, gmail, restart=False)
            return
        delta = Delta()
        try:
            pages = list(gmail.api.iter_history(cursor))
        except InvalidCursorError:
            snapshot(self.store, gmail, restart=True)
            resync_labels(self.store, gmail)
            return
        for page in pages:
            delta.read(page.records)
        with self.store.session() as session:
            if delta.deleted:
                delete_stored(session, gmail, delta.deleted)
            store_states(session, gmail, delta.labels)
        intake = take_in(self.store, gmail, delta.added)
        if intake.deferral is not None:
            raise intake.deferral
        if intake.failure is not None:
            raise intake.failure
        with self.store.session() as session:
            save_history_id(session, gmail.account_id, pages[-1].history_id or cursor)
