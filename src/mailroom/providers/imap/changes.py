"""Changes other clients made to messages mailroom already has: flags, expunges, renumbering.

Per folder, cheapest way first:

* **QRESYNC** — ``UID FETCH 1:* (FLAGS) (CHANGEDSINCE m VANISHED)`` returns the
  flags of every message changed since mod-sequence ``m`` *and* the UIDs expunged
  since then, in one round trip. When the folder's HIGHESTMODSEQ still equals
  ``m``, nothing changed and nothing is asked.
* **CONDSTORE** only — the same flag fetch without VANISHED; expunges come from a
  **UID-set diff**: the UIDs the server has (``UID SEARCH``, ESEARCH when offered)
  against the UIDs stored for the folder.
* neither — every stored message's flags are fetched and compared, plus the diff.

With Gmail's extensions the same fetch asks for ``X-GM-LABELS`` too (Gmail raises a
message's mod-sequence when its labels change), and the labels are mirrored
(:mod:`.gmail_labels`).

A message that vanished from one folder is only *un-located* here; if it was
moved, the syncer finds it in its new folder in the same sync (it is recognised by
its provider id and re-located, never deleted and re-created); what is left
without a location after a full sync is deleted (:func:`.mirror.delete_orphans`).

**UIDVALIDITY change** (:func:`remap_folder`): every stored UID of the folder is
void. An envelope scan of the folder recognises the messages already stored by
Message-ID and size (under any form of their provider id: clear, or the
owner's keyed hash under any key version, :mod:`.namer`) and re-maps their
locations — nothing is downloaded again, nothing is duplicated — and the
marks restart as on first contact, so what was not recognised is history for
the importer.

Flags and expunges of one scan are written in one transaction together with the
new ``highest_modseq``, so a crash never skips a change.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import update

from mailroom.ingest.mirror import AccountScope, ChangeSet, located, remove_locations
from mailroom.providers.imap.connection import FolderStatus, ImapConnection
from mailroom.providers.imap.fetcher import fetch_envelopes, known_envelopes
from mailroom.providers.imap.gmail_ext import LABELS_ITEM, labels_of, speaks_gmail
from mailroom.providers.imap.gmail_labels import label_ids, mirror_labels
from mailroom.providers.imap.mirror import add_locations, apply_flags, normalize_flags
from mailroom.providers.imap.namer import ImapNamer
from mailroom.providers.imap.state import FolderMarks, mark_import
from mailroom.store.engine import Store
from mailroom.store.models import Account, Folder

__all__ = ["ChangeOutcome", "remap_folder", "scan_changes"]

log = logging.getLogger(__name__)

ENVELOPE_CHUNK = 1000


@dataclass
class ChangeOutcome:
    """What a change scan found."""

    flags_changed: int = 0
    removed: int = 0
    affected: set[int] | None = None

    @property
    def changed(self) -> bool:
        """Whether anything changed in the store."""
        return bool(self.flags_changed or self.removed)


def _server_uids(conn: ImapConnection, status: FolderStatus) -> set[int]:
    return set(conn.uids("1:*")) if status.exists else set()


def scan_changes(
    conn: ImapConnection,
    store: Store,
    scope: AccountScope,
    folder_id: int,
    status: FolderStatus,
    marks: FolderMarks,
) -> ChangeOutcome:
    """Apply flag changes and expunges of the selected folder since the last scan."""
    outcome = ChangeOutcome(affected=set())
    since = marks.highest_modseq
    modseq_known = conn.condstore and since is not None and status.highest_modseq is not None
    if conn.qresync and modseq_known and status.highest_modseq == since:
        return outcome  # QRESYNC: expunges bump HIGHESTMODSEQ too, so nothing happened
    flags: dict[int, frozenset[str]] = {}
    gmail: dict[int, tuple[str, ...]] = {}  # uid -> X-GM-LABELS
    items = ("UID", "FLAGS", LABELS_ITEM) if speaks_gmail(conn) else ("UID", "FLAGS")
    vanished: set[int] = set()
    if status.exists and modseq_known:
        modifiers = [f"CHANGEDSINCE {since}"]
        if conn.qresync:
            modifiers.append("VANISHED")
            conn.take_vanished()
        data = conn.fetch("1:*", items, modifiers)
        flags = {uid: normalize_flags(d.get(b"FLAGS") or ()) for uid, d in data.items()}
        gmail = _gmail_labels(data)
        if conn.qresync:
            vanished = set(conn.take_vanished())
    elif status.exists and marks.last_seen_uid:
        data = conn.fetch(f"1:{marks.last_seen_uid}", items)
        flags = {uid: normalize_flags(d.get(b"FLAGS") or ()) for uid, d in data.items()}
        gmail = _gmail_labels(data)
    with store.session() as session:
        validity = session.get(Folder, folder_id).uidvalidity  # type: ignore[union-attr]
        assert validity is not None
        if not (conn.qresync and modseq_known and status.exists):
            stored = located(session, folder_id, validity)
            vanished = set(stored) - _server_uids(conn, status)
        changes = ChangeSet()
        if flags:
            where = located(session, folder_id, validity, flags)
            by_message = {where[uid]: f for uid, f in flags.items() if uid in where}
            changed = apply_flags(session, scope, changes, by_message, defined=status.flags)
            if gmail:
                in_all_mail = scope.folder_labels.get(folder_id) is None
                known: dict[str, int | None] = {}
                wanted = {
                    where[uid]: label_ids(
                        session, scope.user_id, names, in_all_mail=in_all_mail, known=known
                    )
                    for uid, names in gmail.items()
                    if uid in where
                }
                changed |= mirror_labels(session, scope, changes, wanted)
            outcome.flags_changed = len(changed)
        if vanished:
            affected = remove_locations(
                session, scope, changes, folder_id, vanished, uidvalidity=validity
            )
            outcome.removed = len(affected)
            outcome.affected = affected
        marks.highest_modseq = status.highest_modseq
        folder = session.get(Folder, folder_id)
        assert folder is not None
        marks.save(folder)
        changes.record(session, scope.user_id)
    return outcome


def _gmail_labels(data: dict[int, dict[bytes, object]]) -> dict[int, tuple[str, ...]]:
    found: dict[int, tuple[str, ...]] = {}
    for uid, values in data.items():
        labels = labels_of(values)
        if labels is not None:
            found[uid] = labels
    return found


def remap_folder(
    conn: ImapConnection,
    store: Store,
    scope: AccountScope,
    folder_id: int,
    status: FolderStatus,
    marks: FolderMarks,
) -> int:
    """Re-map a folder whose UIDVALIDITY changed; returns how many messages were recognised."""
    uids = sorted(_server_uids(conn, status))
    envelopes = {}
    for start in range(0, len(uids), ENVELOPE_CHUNK):
        found, _failed = fetch_envelopes(conn, uids[start : start + ENVELOPE_CHUNK])
        envelopes.update(found)
    with store.session() as session:
        namer = ImapNamer.of(session, scope.user_id)
        known = known_envelopes(session, scope.account_id, namer, envelopes.values())
        matched = [
            (known[uid], uid, e.flags) for uid, e in sorted(envelopes.items()) if uid in known
        ]
        changes = ChangeSet()
        remove_locations(session, scope, changes, folder_id)
        add_locations(
            session, scope, changes, folder_id, status.uidvalidity, matched, defined=status.flags
        )
        folder = session.get(Folder, folder_id)
        assert folder is not None
        old = folder.uidvalidity
        folder.uidvalidity = status.uidvalidity
        top = (status.uidnext - 1) if status.uidnext else max(uids, default=0)
        marks.last_seen_uid = top
        marks.import_floor_uid = top + 1 if len(matched) < len(uids) else 1
        marks.highest_modseq = status.highest_modseq
        marks.failures.clear()
        marks.save(folder)
        unmatched = len(uids) - len(matched)
        if unmatched:
            session.execute(
                update(Account)
                .where(Account.id == scope.account_id)
                .values(import_total=Account.import_total + unmatched)
            )
        mark_import(session, scope.account_id)
        changes.record(session, scope.user_id)
    log.info(
        "UIDVALIDITY of folder %s changed (%s -> %s): %d of %d messages re-mapped",
        folder_id,
        old,
        status.uidvalidity,
        len(matched),
        len(uids),
    )
    return len(matched)
