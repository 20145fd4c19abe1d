"""Sync: make sure new mail and other clients' changes are seen, then stop.

``sync_account(store, account_id)`` — one call, idempotent, safe to run N-fold:

1. log in (:mod:`.login`; a refused login marks the account ``auth_error``);
2. folder discovery (:mod:`.discovery`) — before any message, so new folders and
   their labels exist first; renamed and deleted folders are handled there;
3. per synced folder, in import order: SELECT (read-only), then
   * first contact: set the marks (``last_seen_uid`` = top, ``import_floor_uid``
     just above it; :mod:`.state`) and fetch nothing — the past is the importer's;
   * UIDVALIDITY changed: re-map the folder (:func:`.changes.remap_folder`);
   * otherwise: flags and expunges since the last scan (:func:`.changes.scan_changes`);
   * new mail: UIDs above ``last_seen_uid``, ascending, 50 per page
     (:func:`.fetcher.store_page`), the mark advancing after each committed page;
4. when every folder answered (a folder the server refuses is skipped, and then
   nothing is judged): messages left without any location are gone from
   the server and are deleted — after a search of the folders still importing,
   because a message moved into a folder's history is not gone (it is re-located).

Returns the ids of the folders where something changed, so follow-up work can be
scheduled per folder. ``folders=`` limits a sync to some folders (the IDLE
watcher syncs only the inbox); such a partial sync never deletes anything.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import nullcontext

from sqlalchemy import select, update

from mailroom.config import Settings
from mailroom.ingest.mirror import (
    AccountScope,
    ChangeSet,
    delete_orphans,
    located,
    orphans,
)
from mailroom.providers.imap.changes import remap_folder, scan_changes
from mailroom.providers.imap.connection import CommandError, ImapConnection
from mailroom.providers.imap.discovery import discover, syncable_folders
from mailroom.providers.imap.fetcher import fetch_envelopes, run_page
from mailroom.providers.imap.gmail_ext import msgid_of, search_msgid
from mailroom.providers.imap.login import account_connection
from mailroom.providers.imap.mirror import add_locations
from mailroom.providers.imap.namer import ImapNamer, stored_message_ids
from mailroom.providers.imap.state import PAGE_SIZE, FolderMarks, mark_import
from mailroom.store.checkpoints import background_checkpoints
from mailroom.store.engine import Store
from mailroom.store.models import Account, Folder, Message

__all__ = ["ImapSyncer", "sync_account"]

log = logging.getLogger(__name__)

ORPHAN_SEARCH_LIMIT = 200


class ImapSyncer:
    """The :class:`~mailroom.providers.base.Syncer` of IMAP accounts."""

    def __init__(self, store: Store, settings: Settings | None = None) -> None:
        self.store = store
        self.settings = settings

    def sync(self, account_id: int) -> list[int]:
        """Sync the account; returns the ids of the folders touched."""
        return sync_account(self.store, account_id, settings=self.settings)


def sync_account(
    store: Store,
    account_id: int,
    *,
    settings: Settings | None = None,
    connection: ImapConnection | None = None,
    folders: Sequence[int] | None = None,
    budget: int | None = None,
) -> list[int]:
    """Sync one account (see the module docstring); returns the folder ids touched."""
    touched: set[int] = set()
    with account_connection(store, account_id, settings=settings, connection=connection) as conn:
        with store.session() as session:
            scope = AccountScope.load(session, account_id)
            if folders is None:
                changes = ChangeSet()
                found = discover(session, conn, scope, changes)
                changes.record(session, scope.user_id)
                mark_import(session, account_id)  # new folders have history, gone ones none
                touched.update(found.created)
                touched.update(found.renamed)
            targets = [
                (f.id, f.path)
                for f in syncable_folders(session, account_id)
                if folders is None or f.id in folders
            ]
        left = budget
        answered = True
        for folder_id, path in targets:
            try:
                changed, used = _sync_folder(conn, store, scope, folder_id, path, left)
            except CommandError as exc:
                # One folder refusing (deleted meanwhile, no rights) costs that folder only.
                log.warning("Folder %r of account %s not synced: %s", path, account_id, exc)
                answered = False
                continue
            if changed:
                touched.add(folder_id)
            if left is not None:
                left = max(0, left - used)
        if folders is None and answered:
            _judge_orphans(conn, store, scope)
    return sorted(touched)


def _sync_folder(
    conn: ImapConnection,
    store: Store,
    scope: AccountScope,
    folder_id: int,
    path: str,
    budget: int | None,
) -> tuple[bool, int]:
    status = conn.select(path, readonly=True)
    with store.session() as session:
        folder = session.get(Folder, folder_id)
        assert folder is not None
        marks = FolderMarks.of(folder)
        if folder.uidvalidity is None:
            folder.uidvalidity = status.uidvalidity
            top = (status.uidnext - 1) if status.uidnext else max(conn.uids("1:*"), default=0)
            marks.last_seen_uid = top
            marks.import_floor_uid = top + 1 if status.exists else 1
            marks.highest_modseq = status.highest_modseq
            marks.save(folder)
            if status.exists:
                session.execute(
                    update(Account)
                    .where(Account.id == scope.account_id)
                    .values(import_total=Account.import_total + status.exists)
                )
            mark_import(session, scope.account_id)
            return False, 0
        validity = folder.uidvalidity
    changed = False
    if validity != status.uidvalidity:
        changed = remap_folder(conn, store, scope, folder_id, status, marks) > 0 or changed
    else:
        changed = scan_changes(conn, store, scope, folder_id, status, marks).changed
    new_changed, used = _new_mail(
        conn, store, scope, folder_id, path, status.uidvalidity, marks, budget
    )
    return changed or new_changed, used


def _new_mail(
    conn: ImapConnection,
    store: Store,
    scope: AccountScope,
    folder_id: int,
    path: str,
    uidvalidity: int,
    marks: FolderMarks,
    budget: int | None,
) -> tuple[bool, int]:
    uids = conn.uids(f"{(marks.last_seen_uid or 0) + 1}:*")
    if not uids:
        return False, 0
    with store.session() as session:
        already = located(session, folder_id, uidvalidity, uids)
    # Already placed here (e.g. by the propagator's COPYUID) or given up: nothing to fetch.
    todo = [u for u in uids if u not in already and u not in marks.given_up]
    # Many new messages (a sync after days offline) are a bulk import (store.checkpoints).
    with background_checkpoints(store) if len(todo) > PAGE_SIZE else nullcontext():
        changed = False
        used = 0
        start = 0
        while True:
            if budget is not None and used >= budget:
                break
            page = todo[start : start + PAGE_SIZE]
            if budget is not None:
                page = page[: budget - used]
            retry: set[int] = set()
            if page:
                outcome, retry = run_page(
                    conn, store, scope, folder_id, path, uidvalidity, marks, page
                )
                changed = changed or outcome.changed
                used += len(page)
            start += len(page)
            # Everything below the next UID still to do is handled, unless a failure holds the mark.
            upto = todo[start] - 1 if start < len(todo) else uids[-1]
            if retry:
                upto = min(upto, min(retry) - 1)
            if upto > (marks.last_seen_uid or 0):
                marks.last_seen_uid = upto
            with store.session() as session:
                folder = session.get(Folder, folder_id)
                assert folder is not None
                marks.save(folder)
            if retry or start >= len(todo):
                break  # a failed page is asked again by the next sync
        return changed, used


def _judge_orphans(conn: ImapConnection, store: Store, scope: AccountScope) -> bool:
    """Delete messages no folder holds any more; returns whether anything changed."""
    with store.session() as session:
        ids = orphans(session, scope.account_id)
        if not ids:
            return False
        importing = [
            (f.id, f.path, f.uidvalidity, FolderMarks.of(f).import_floor_uid or 0)
            for f in syncable_folders(session, scope.account_id)
            if FolderMarks.of(f).importing and f.uidvalidity is not None
        ]
        rows = session.execute(
            select(Message.id, Message.provider_id).where(Message.id.in_(ids[:ORPHAN_SEARCH_LIMIT]))
        ).all()
        namer = ImapNamer.of(session, scope.user_id)
        # The clear Message-ID to search for: in a keyed id only the stored headers have it.
        header_ids = (
            stored_message_ids(session, scope.user_id, {m: p for m, p in rows}, namer)
            if importing
            else {}
        )
    deferred = set(ids[ORPHAN_SEARCH_LIMIT:]) if importing else set()
    found: set[int] = set()
    for folder_id, path, validity, floor in importing:
        if floor <= 1:
            continue
        conn.select(path, readonly=True)
        for message_id, pid in rows:
            if message_id in found:
                continue
            mid = header_ids.get(message_id)
            msgid = msgid_of(pid)
            if msgid is not None:  # Gmail: the X-GM-MSGID finds it
                candidates = search_msgid(conn, msgid, f"1:{floor - 1}")
            elif mid is None:
                deferred.add(message_id)  # only its bytes identify it: the importer decides
                continue
            else:
                candidates = conn.search_header("Message-ID", mid, f"1:{floor - 1}")
            if not candidates:
                continue
            envelopes, _failed = fetch_envelopes(conn, candidates)
            hits = [
                (message_id, e.uid, e.flags)
                for e in envelopes.values()
                if pid in e.provider_ids(namer)
            ]
            if hits:
                with store.session() as session:
                    changes = ChangeSet()
                    defined = conn.selected_status.flags if conn.selected_status else None
                    add_locations(
                        session, scope, changes, folder_id, validity, hits, defined=defined
                    )
                    changes.record(session, scope.user_id)
                found.add(message_id)
    gone = [m for m in ids if m not in found and m not in deferred]
    if gone:
        with store.session() as session:
            changes = ChangeSet()
            # Re-check inside the transaction: a concurrent sync may have re-located some.
            still = set(orphans(session, scope.account_id))
            delete_orphans(session, scope, changes, [m for m in gone if m in still])
            changes.record(session, scope.user_id)
        log.info(
            "Deleted %d messages of account %s that left the server", len(gone), scope.account_id
        )
    return bool(gone or found)
