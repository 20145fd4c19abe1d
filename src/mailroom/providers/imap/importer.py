"""Import: the history of an IMAP account, one page of 50 messages per call, newest first.

``import_page(store, account_id)`` is one job: it picks the first folder, in
import order (Inbox, Sent, Drafts, user folders, Archive, Spam, Trash), whose
``import_floor_uid`` still has history below it, asks the server which UIDs
exist below the floor, takes the highest 50 that are not stored in that folder
yet — a message already there is never fetched again — stores them
(:func:`.fetcher.store_page`) and lowers the floor. It returns whether work is
left, so the caller (a job that schedules the next page, or ``mailroom sync
--until-imported``) knows whether to go on. Pages of several accounts may
interleave freely: every call reads its marks afresh.

Page size: 50 UIDs (``PAGE_SIZE``). On a connection kept across pages (``mailroom
sync --until-imported``, a worker holding its connection), where the next page is
fetched and parsed ahead while this one is stored (:mod:`.prefetch`), pages grow
from 50 by doubling to ``KEPT_PAGE_LIMIT`` (400): every page is one transaction, and
much of a small page's cost is the transaction's fixed part (threading queries,
bookkeeping and the commit cost about as much for 50 messages as for 400). A page
holds at most about ``PAGE_BYTES`` (32 MiB) of mail at the average message size of
the last page seen, and never fewer than 50 messages, so a folder of large messages
keeps small pages. The next page's size is chosen before its mail is seen, so where
the mail turns large one or two pages may still be big (at most 400 messages).

Failures cost one message: a page with a message that cannot be fetched or stored
keeps the floor just above it and is asked again; on the 5th failed attempt the
message goes to the skipped ledger and the floor moves past it (:mod:`.state`).

Progress: ``Account.import_total`` grows by each folder's message count at first
contact (and by the unrecognised messages of a UIDVALIDITY reset);
``Account.import_done`` grows by what each page handled. When no folder has
history left, ``Account.import_finished_at`` is set (:func:`.state.mark_import`).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterator
from datetime import datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from mailroom.config import Settings
from mailroom.ingest.collector import fewer_collections
from mailroom.ingest.mirror import AccountScope, insert_for, located
from mailroom.providers.base import ImportState
from mailroom.providers.imap.connection import ImapConnection
from mailroom.providers.imap.discovery import syncable_folders
from mailroom.providers.imap.fetcher import fetch_envelopes_and_bodies, run_page
from mailroom.providers.imap.login import account_connection, open_connection
from mailroom.providers.imap.prefetch import FetchedPage, LookAhead
from mailroom.providers.imap.state import PAGE_SIZE, FolderMarks, import_state, mark_import
from mailroom.providers.imap.syncer import sync_account
from mailroom.store.engine import Store
from mailroom.store.models import Account, Folder, SyncState, utcnow

__all__ = ["ImapImporter", "import_page", "import_stalled"]

log = logging.getLogger(__name__)

LAST_PAGE_KEY = "imap.import.last_page_at"
STALL_AFTER = timedelta(minutes=5)
KEPT_PAGE_LIMIT = 8 * PAGE_SIZE  # pages on a kept connection grow to this (see above)
PAGE_BYTES = 32 * 1024 * 1024  # ... holding about this much mail at most
_SCAN_CHUNK = 500


class ImapImporter:
    """The :class:`~mailroom.providers.base.Importer` of IMAP accounts."""

    def __init__(self, store: Store, settings: Settings | None = None) -> None:
        self.store = store
        self.settings = settings
        self._connections: dict[int, ImapConnection] = {}
        # A job that drops the importer without close() must not leak the connection.
        self._finalizer = weakref.finalize(self, _close_all, self._connections)

    def import_page(self, account_id: int) -> bool:
        """Import one page; True while history is left (the connection is kept for the next)."""
        conn = self._connections.get(account_id)
        if conn is None or conn.closed:
            conn = open_connection(self.store, account_id, settings=self.settings)
            self._connections[account_id] = conn
        return import_page(self.store, account_id, settings=self.settings, connection=conn)

    def close(self) -> None:
        """Log out of every connection kept between pages."""
        _close_all(self._connections)

    def state(self, account_id: int) -> ImportState:
        """Whether the account is still importing (one query)."""
        with self.store.session() as session:
            return import_state(session, account_id)


def _close_all(connections: dict[int, ImapConnection]) -> None:
    for conn in connections.values():
        conn.close()
    connections.clear()


def import_stalled(store: Store, account_id: int, now: datetime | None = None) -> bool:
    """Whether the account has history left but no page ran for 5 minutes (restart it)."""
    now = now or utcnow()
    with store.session() as session:
        if not import_state(session, account_id).importing:
            return False
        last = session.scalar(
            select(SyncState.updated_at).where(
                SyncState.account_id == account_id, SyncState.key == LAST_PAGE_KEY
            )
        )
    return last is None or now - last >= STALL_AFTER


def _heartbeat(session: Session, account_id: int) -> None:
    """Note that a page was imported just now (``import_stalled`` reads it)."""
    now = utcnow()
    session.execute(
        insert_for(session, SyncState)
        .values(account_id=account_id, key=LAST_PAGE_KEY, value=now.isoformat(), updated_at=now)
        .on_conflict_do_update(
            index_elements=["account_id", "key"],
            set_={"value": now.isoformat(), "updated_at": now},
        )
    )


def _work(
    session: Session, account_id: int, folders: list[Folder]
) -> tuple[AccountScope, list[tuple[int, str, int]]]:
    """The account's scope and its folders with history left: (id, path, UIDVALIDITY)."""
    scope = AccountScope.load(session, account_id)
    work = [
        (f.id, f.path, f.uidvalidity)
        for f in folders
        if FolderMarks.of(f).importing and f.uidvalidity is not None
    ]
    return scope, work


def import_page(
    store: Store,
    account_id: int,
    *,
    settings: Settings | None = None,
    connection: ImapConnection | None = None,
) -> bool:
    """Import one page of history (see the module docstring); True while work is left."""
    with fewer_collections():
        return _import_page(store, account_id, settings=settings, connection=connection)


def _import_page(
    store: Store,
    account_id: int,
    *,
    settings: Settings | None,
    connection: ImapConnection | None,
) -> bool:
    with account_connection(store, account_id, settings=settings, connection=connection) as conn:
        with store.session() as session:
            folders = syncable_folders(session, account_id)
            discovered = session.scalar(select(Folder.id).where(Folder.account_id == account_id))
            uncontacted = discovered is None or any(f.uidvalidity is None for f in folders)
            if not uncontacted:
                scope, work = _work(session, account_id, folders)
        if uncontacted:
            sync_account(store, account_id, settings=settings, connection=conn)
            with store.session() as session:
                scope, work = _work(session, account_id, syncable_folders(session, account_id))
        if not work:
            with store.session() as session:
                return mark_import(session, account_id)
        folder_id, path, validity = work[0]
        status = conn.selected_status if conn.selected == path else None
        if status is None:
            status = conn.select(path, readonly=True)
        if status.uidvalidity != validity:
            # The folder was reset behind our back: the syncer re-maps it first.
            sync_account(store, account_id, settings=settings, connection=conn, folders=[folder_id])
            return True
        return _page(conn, store, scope, folder_id, path, validity, lookahead=connection is conn)


def _uids_below(conn: ImapConnection, floor: int, wanted: int) -> Iterator[list[int]]:
    """The folder's UIDs below ``floor``, newest first, in chunks of at most _SCAN_CHUNK.

    The server is asked for windows just below the floor, starting with twice
    the ``wanted`` UIDs (this page and the next) and four times wider each
    time, so a page costs a search of a few hundred UIDs rather than a list of
    the whole folder (UIDs are mostly dense; a sparse folder costs a few more
    searches).
    """
    high, span = floor - 1, 2 * wanted  # with room for gaps
    while high >= 1:
        low = max(1, high - span + 1)
        found = conn.uids(f"{low}:{high}")
        found.reverse()
        for start in range(0, len(found), _SCAN_CHUNK):
            yield found[start : start + _SCAN_CHUNK]
        high, span = low - 1, span * 4


def _next_size(ahead: LookAhead | None, size: int) -> int:
    """The size of the page after one of ``size`` (see the module docstring)."""
    if ahead is None:
        return PAGE_SIZE
    grown = min(2 * size, KEPT_PAGE_LIMIT)
    if ahead.average_bytes:
        grown = min(grown, max(PAGE_SIZE, int(PAGE_BYTES / ahead.average_bytes)))
    return grown


def _page(
    conn: ImapConnection,
    store: Store,
    scope: AccountScope,
    folder_id: int,
    path: str,
    validity: int,
    *,
    lookahead: bool = False,
) -> bool:
    """Import one page of one folder; True while the account has history left."""
    with store.session() as session:
        folder = session.get(Folder, folder_id)
        assert folder is not None
        marks = FolderMarks.of(folder)
    floor = marks.import_floor_uid or 1
    ahead = LookAhead.of(conn, floor - 1) if lookahead else None
    size = ahead.page_size if ahead is not None else PAGE_SIZE
    next_size = _next_size(ahead, size)
    page: list[int] = []
    following: list[int] = []  # the page after this one, for the look-ahead
    skipped_located = 0
    lowest_seen = floor
    exhausted = True  # the scan reached the bottom of the folder
    with store.session() as session:
        for chunk in _uids_below(conn, floor, size + next_size):
            stored = located(session, folder_id, validity, chunk)
            for uid in chunk:
                if len(following) >= next_size:
                    break
                if len(page) >= size:
                    if uid not in stored and uid not in marks.given_up:
                        following.append(uid)
                    continue
                lowest_seen = uid
                if uid in stored or uid in marks.given_up:
                    skipped_located += 1
                else:
                    page.append(uid)
            if len(following) >= next_size or (len(page) >= size and ahead is None):
                exhausted = False
                break
    prefetched = ahead.take(folder_id, validity, page) if ahead is not None and page else None
    if ahead is not None:
        ahead.page_size = next_size  # the next page is exactly ``following``
    if ahead is not None and following and not marks.careful:
        ahead.start(folder_id, path, validity, following)  # a worker fetches the next page
        if prefetched is None and page:
            # Nothing usable was prefetched: fetch this page now, bodies with envelopes.
            envelopes, bodies, failed = fetch_envelopes_and_bodies(conn, page)
            prefetched = FetchedPage(folder_id, validity, tuple(page), envelopes, bodies, failed)
    if ahead is not None and prefetched is not None:
        ahead.observe(prefetched.bodies.values())
    handled = skipped_located
    retry: set[int] = set()
    if page:
        outcome, retry = run_page(
            conn,
            store,
            scope,
            folder_id,
            path,
            validity,
            marks,
            page,
            given=(prefetched.envelopes, prefetched.bodies, prefetched.failed)
            if prefetched is not None
            else None,
            parsed=prefetched.parsed if prefetched is not None else None,
        )
        handled += len(outcome.handled)
        new_floor = max(retry) + 1 if retry else lowest_seen
    else:
        new_floor = 1  # nothing below the floor is missing: this folder's history is done
    if len(page) < size and not retry and exhausted:
        new_floor = 1  # the scan reached the bottom of the folder
    marks.import_floor_uid = min(floor, new_floor)
    with store.session() as session:
        folder = session.get(Folder, folder_id)
        assert folder is not None
        marks.save(folder)
        if handled:
            session.execute(
                update(Account)
                .where(Account.id == scope.account_id)
                .values(import_done=Account.import_done + handled)
            )
        _heartbeat(session, scope.account_id)
        session.flush()
        more = mark_import(session, scope.account_id)
    log.debug(
        "Imported a page of %s (account %s): %d handled, floor %s -> %s",
        path,
        scope.account_id,
        handled,
        floor,
        marks.import_floor_uid,
    )
    return more
