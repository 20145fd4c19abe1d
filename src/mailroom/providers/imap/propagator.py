"""Propagation: the IMAP :class:`~mailroom.providers.base.Propagator`.

The operations service (:mod:`mailroom.labels.operations`) changes labels and
``seen_at`` in the database first and queues one ``PendingChange`` per message;
the consumer (:mod:`mailroom.labels.propagation`) picks the due ones, groups
them per message and hands a batch to :class:`ImapPropagator`, which makes the
server match the database, message by message, **from the message's current
state** — not by replaying the operation names — so replaying a job, or a job
for an older operation of the same message, changes nothing (idempotent). Only
the IMAP work lives here (flags, MOVE/COPY + EXPUNGE, locations from COPYUID);
attempts, backoff and the states are the consumer's.

What the server should hold for a message:

* flags: ``\\Seen`` iff ``seen_at`` is set; ``\\Flagged`` iff it carries Starred (on
  every copy); and for each keyword a pending change names (``\\Answered``,
  ``\\Draft``, ``$Forwarded``, ``$Junk``, custom ones; see the IMAP ``mirror``
  module) the flag iff the keyword is stored — unless the folder's PERMANENTFLAGS
  allow neither ``\\*`` nor that flag: then the keyword stays local (a log line);
* the folders it lives in. Labels are database-only unless a *location* label goes
  away (SPEC §6), with the moves the operations mean:

  1. an operation added Trash (or Spam) and the account has that folder → only there
     (trash/spam move the message out of every other folder);
  2. otherwise every folder it is in stays while that folder's label is on it — so
     copies another client made are left alone — plus INBOX when it carries Inbox
     (an operation that put it back in the inbox also takes it out of Archive, which
     is location bookkeeping, and the Archive label goes with it);
  3. if that leaves nowhere (the location label was removed): Trash/Spam if it
     carries one, else the folder of the most recently added label the operations
     added that has a folder (Sent for a sent draft), else of its most recently
     added user label that has a folder, else Archive (created on the server if the
     account has none).

With Gmail's extensions the places are All Mail, Spam and Trash only and labels
travel as ``X-GM-LABELS`` (:mod:`.gmail_propagate`); flags are carried the same way.

Folder changes of a label (created, renamed, destroyed; no message) go to
:mod:`~mailroom.providers.imap.folder_ops` (CREATE, RENAME, DELETE).

Moves use MOVE (or COPY + ``\\Deleted`` + EXPUNGE without it); a folder it must
leave with nowhere to go is expunged from; a deleted-forever message is found by
its Message-ID in every folder and expunged (a sealed message's from its delete
change's payload: its provider id is a keyed hash, ``labels.sealed_deletes``).
Locations are updated from COPYUID in the same transaction that marks the
changes ``done`` (the outcome's ``record``); until then they are ``pending`` and
the syncer leaves the message's labels and flags alone ("pending local changes
win"). A server refusal is a
``retry`` outcome (an attempt, with the consumer's backoff and attempt cap); a
lost connection raises ``TransientError`` and costs no attempt.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.ingest.mirror import AccountScope, ChangeSet, insert_for
from mailroom.labels import propagation
from mailroom.labels.keywords import stored_keywords
from mailroom.labels.propagation import recent_label
from mailroom.labels.resolver import system_label
from mailroom.labels.sealed_deletes import open_message_id
from mailroom.providers.base import MessageChanges, Outcome
from mailroom.providers.imap.append import append_unplaced
from mailroom.providers.imap.connection import CommandError, ImapConnection
from mailroom.providers.imap.discovery import discover, folder_role, syncable
from mailroom.providers.imap.fetcher import fetch_envelopes
from mailroom.providers.imap.folder_ops import propagate_folder_change
from mailroom.providers.imap.gmail_ext import is_all_mail, msgid_of, speaks_gmail
from mailroom.providers.imap.gmail_propagate import (
    delete_forever,
    home_folder,
    labels_named,
    store_labels,
)
from mailroom.providers.imap.identity import parse_provider_id, size_of
from mailroom.providers.imap.login import account_connection
from mailroom.providers.imap.mirror import flag_of
from mailroom.store.engine import Store
from mailroom.store.models import (
    Folder,
    Message,
    MessageLabel,
    MessageLocation,
)

__all__ = ["ImapPropagator", "PropagationResult", "propagate_pending"]

log = logging.getLogger(__name__)


@dataclass
class PropagationResult:
    """What one propagation run did: the consumer's counts and the IMAP work."""

    done: int = 0
    retried: int = 0
    failed: int = 0
    moved: int = 0
    flagged: int = 0
    expunged: int = 0


@dataclass
class _FolderInfo:
    id: int
    path: str
    uidvalidity: int | None
    label_id: int | None
    role: str | None
    special_use: str | None = None


@dataclass
class _Layout:
    """The account's folders, by id and by the role/label they stand for."""

    folders: dict[int, _FolderInfo] = field(default_factory=dict)
    by_label: dict[int, int] = field(default_factory=dict)  # label -> primary folder id
    roles: dict[str, int] = field(default_factory=dict)  # role -> label id

    @classmethod
    def load(cls, session: Session, account_id: int, user_id: int) -> _Layout:
        layout = cls()
        for folder in session.scalars(select(Folder).where(Folder.account_id == account_id)):
            if not syncable(folder):
                continue
            info = _FolderInfo(
                folder.id,
                folder.path,
                folder.uidvalidity,
                folder.label_id,
                folder_role(folder.path, folder.delimiter, folder.special_use),
                folder.special_use,
            )
            layout.folders[folder.id] = info
        # Prefer the special-use / shortest folder of a label, like the bindings do.
        for info in sorted(layout.folders.values(), key=lambda f: (f.role is None, len(f.path))):
            if info.label_id is not None:
                layout.by_label.setdefault(info.label_id, info.id)
        for role in ("inbox", "trash", "spam", "archive"):
            layout.roles[role] = system_label(session, user_id, role).id
        return layout

    def folder_for_role(self, role: str) -> int | None:
        return self.by_label.get(self.roles[role])

    @property
    def all_mail(self) -> int | None:
        """Gmail's All Mail folder, if the account has one."""
        found = [f.id for f in self.folders.values() if is_all_mail(f.special_use)]
        return found[0] if found else None


class ImapPropagator:
    """The :class:`~mailroom.providers.base.Propagator` of IMAP accounts.

    ``stats`` adds up the IMAP work of every batch (moves, flag stores, expunges).
    """

    def __init__(
        self,
        store: Store,
        settings: Settings | None = None,
        *,
        connection: ImapConnection | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.connection = connection
        self.stats = PropagationResult()

    def propagate(self, account_id: int, batch: Sequence[MessageChanges]) -> Iterator[Outcome]:
        """Carry each message's changes, one outcome per message (module docstring).

        A ``CommandError`` (the server refused) is that message's ``retry``; a
        ``TransientError`` (the connection is gone) ends the batch uncharged.
        """
        with account_connection(
            self.store, account_id, settings=self.settings, connection=self.connection
        ) as conn:
            with self.store.session() as session:
                scope = AccountScope.load(session, account_id)
                layout = _Layout.load(session, account_id, scope.user_id)
            for changes in batch:
                try:
                    if changes.folder_label is not None:
                        outcome = propagate_folder_change(conn, self.store, account_id, changes)
                    elif changes.message_id is not None:
                        # A message created in mailroom is appended first (imap.append).
                        outcome = append_unplaced(
                            conn, self.store, scope, changes
                        ) or _propagate_message(
                            conn, self.store, scope, layout, changes, self.stats
                        )
                    else:
                        outcome = _propagate_delete(
                            conn, self.store, scope, layout, changes, self.stats
                        )
                except CommandError as exc:
                    outcome = Outcome.retry(changes, str(exc))
                yield outcome
                if changes.folder_label is not None:  # settled: the folders may have changed
                    with self.store.session() as session:
                        layout = _Layout.load(session, account_id, scope.user_id)


def propagate_pending(
    store: Store,
    account_id: int,
    *,
    settings: Settings | None = None,
    connection: ImapConnection | None = None,
    now: datetime | None = None,
) -> PropagationResult:
    """Run the consumer (:func:`mailroom.labels.propagation.propagate_pending`) for an account.

    For callers that want the IMAP counts too (tests, benchmarks); the jobs call
    the consumer with the registered propagator.
    """
    propagator = ImapPropagator(store, settings, connection=connection)
    run = propagation.propagate_pending(store, account_id, propagator, now)
    stats = propagator.stats
    return PropagationResult(
        done=run.done,
        retried=run.retried,
        failed=run.failed,
        moved=stats.moved,
        flagged=stats.flagged,
        expunged=stats.expunged,
    )


def _targets(
    session: Session,
    layout: _Layout,
    message_id: int,
    labels: set[int],
    located_in: set[int],
    added: set[int],
) -> set[int]:
    """The folders the message should live in (see the module docstring).

    ``added`` are the labels the pending operations added: trashing or marking as spam
    moves the message out of every other folder, and an operation that puts it back in
    the inbox moves it out of Archive. Otherwise every folder it is in stays as long as
    its label does (several copies made by another client are left alone).
    """
    for role in ("trash", "spam"):
        folder = layout.folder_for_role(role)
        if layout.roles[role] in labels and layout.roles[role] in added and folder is not None:
            return {folder}
    targets = {f for f in located_in if layout.folders[f].label_id in labels}
    inbox = layout.folder_for_role("inbox")
    if layout.roles["inbox"] in labels and inbox is not None:
        if layout.roles["inbox"] in added:
            targets = {f for f in targets if layout.folders[f].role != "archive"}
        targets.add(inbox)
    if targets:
        return targets
    for role in ("trash", "spam"):
        folder = layout.folder_for_role(role)
        if layout.roles[role] in labels and folder is not None:
            return {folder}
    # A label the operations added with a folder of its own, Sent or Drafts too: a sent
    # draft (Drafts -> Sent) moves to the Sent folder, not to Archive.
    moved_to = {label for label in labels & added if label in layout.by_label}
    if moved_to:
        return {layout.by_label[recent_label(session, message_id, moved_to)]}
    user_labels = {
        label
        for label in labels
        if label in layout.by_label and layout.folders[layout.by_label[label]].role is None
    }
    if user_labels:
        return {layout.by_label[recent_label(session, message_id, user_labels)]}
    archive = layout.folder_for_role("archive")
    return {archive} if archive is not None else set()


def _ensure_archive(
    conn: ImapConnection, store: Store, scope: AccountScope, layout: _Layout
) -> int | None:
    """Create an Archive folder on the server when the account has none."""
    folder = layout.folder_for_role("archive")
    if folder is not None:
        return folder
    inbox = layout.folders.get(layout.folder_for_role("inbox") or -1)
    name = "Archive"
    with store.session() as session:
        delimiter = session.scalar(
            select(Folder.delimiter).where(
                Folder.account_id == scope.account_id, Folder.path == "INBOX"
            )
        )
        paths = list(
            session.scalars(select(Folder.path).where(Folder.account_id == scope.account_id))
        )
    others = [p for p in paths if p.upper() != "INBOX"]
    if (
        delimiter
        and inbox
        and others
        and all(p.upper().startswith("INBOX" + delimiter) for p in others)
    ):
        name = f"INBOX{delimiter}Archive"
    conn.create_folder(name)
    with store.session() as session:
        changes = ChangeSet()
        discover(session, conn, scope, changes)
        changes.record(session, scope.user_id)
        fresh = _Layout.load(session, scope.account_id, scope.user_id)
    layout.folders, layout.by_label, layout.roles = fresh.folders, fresh.by_label, fresh.roles
    return layout.folder_for_role("archive")


def _keyword_flags(
    conn: ImapConnection, path: str, keywords: set[str], named: set[str]
) -> dict[str, bool]:
    """IMAP flag → wanted, for the keywords the pending changes named (from the stored rows).

    Only named keywords are touched (a keyword another client set and no sync has
    read yet is left alone). One the selected folder cannot store for good
    (PERMANENTFLAGS without it or ``\\*``) is not set: it stays local, with a log line.
    """
    status = conn.selected_status
    wanted: dict[str, bool] = {}
    for keyword in sorted(named):
        flag = flag_of(keyword)
        if keyword in keywords and status is not None and not status.can_store(flag):
            log.info("The keyword %s stays local: %r cannot store the flag %s", keyword, path, flag)
            continue
        wanted[flag] = keyword in keywords
    return wanted


def _propagate_message(
    conn: ImapConnection,
    store: Store,
    scope: AccountScope,
    layout: _Layout,
    pending: MessageChanges,
    result: PropagationResult,
) -> Outcome:
    message_id = pending.message_id
    assert message_id is not None
    with store.session() as session:
        row = session.execute(
            select(Message.id, Message.seen_at).where(Message.id == message_id)
        ).one_or_none()
        labels = set(
            session.scalars(
                select(MessageLabel.label_id).where(MessageLabel.message_id == message_id)
            )
        )
        locations = [
            (loc.id, loc.folder_id, loc.uid)
            for loc in session.scalars(
                select(MessageLocation).where(MessageLocation.message_id == message_id)
            )
            if loc.folder_id in layout.folders
            and loc.uid is not None
            and loc.uidvalidity == layout.folders[loc.folder_id].uidvalidity
        ]
        keywords = stored_keywords(session, [message_id]).get(message_id, set())
    if row is None:  # deleted meanwhile: its delete is a change of its own
        return Outcome.done(pending)
    named = {str(k) for e in pending.entries for k in e.payload.get("keywords") or {}}
    want_seen = row.seen_at is not None
    want_flagged = scope.starred_label in labels

    # Flags first (a move keeps them), on every copy that still exists.
    present: list[tuple[int, int, int]] = []
    for loc_id, folder_id, uid in locations:
        conn.ensure_selected(layout.folders[folder_id].path, readonly=False)
        envelopes, _failed = fetch_envelopes(conn, [uid])
        env = envelopes.get(uid)
        if env is None:
            with store.session() as session:  # gone behind our back: the syncer re-finds it
                session.execute(delete(MessageLocation).where(MessageLocation.id == loc_id))
            continue
        present.append((loc_id, folder_id, uid))
        wanted = {r"\Seen": want_seen, r"\Flagged": want_flagged}
        wanted.update(_keyword_flags(conn, layout.folders[folder_id].path, keywords, named))
        add = [f for f, want in wanted.items() if want and f.lower() not in env.flags]
        remove = [f for f, want in wanted.items() if not want and f.lower() in env.flags]
        if add or remove:
            conn.set_flags([uid], add, remove)
            result.flagged += 1
    if not present:
        return Outcome.retry(pending, "the message has no known place on the server yet")

    gmail = speaks_gmail(conn)
    with store.session() as session:
        if gmail:
            targets = home_folder(labels, layout.roles, layout.folder_for_role, layout.all_mail)
        else:
            targets = _targets(
                session,
                layout,
                message_id,
                labels,
                {f for _l, f, _u in present},
                set(pending.added_labels),
            )
    if not targets:
        archive = _ensure_archive(conn, store, scope, layout)
        targets = {archive} if archive is not None else {present[0][1]}
    current = {f for _l, f, _u in present}
    to_add = sorted(targets - current)
    leaving = [p for p in present if p[1] not in targets]
    moves: list[tuple[int, int, int, int, int | None]] = []  # loc, from, uid, to, new uid
    for target in to_add:
        if leaving:
            loc_id, source, uid = leaving.pop(0)
            conn.ensure_selected(layout.folders[source].path, readonly=False)
            validity, mapping = conn.move([uid], layout.folders[target].path)
            moves.append((loc_id, source, uid, target, mapping.get(uid)))
            if validity is not None and layout.folders[target].uidvalidity is None:
                layout.folders[target].uidvalidity = validity
            result.moved += 1
        else:  # it must be in one more folder: a copy
            _loc, source, uid = present[0]
            conn.ensure_selected(layout.folders[source].path, readonly=False)
            with conn.guard("copying a message"):
                conn.imap.untagged_responses.pop("COPYUID", None)
                conn.client.copy([uid], layout.folders[target].path)
            result.moved += 1
    expunged: list[int] = []
    left = [source for _l, source, *_ in moves] + [source for _l, source, _u in leaving]
    for loc_id, source, uid in leaving:
        conn.ensure_selected(layout.folders[source].path, readonly=False)
        conn.expunge([uid])
        expunged.append(loc_id)
        result.expunged += 1
    if gmail:
        place = _all_mail_uid(layout, present, moves)
        if place is not None:
            path = layout.folders[place[0]].path
            changed = store_labels(conn, store, message_id, path, place[1], labels_named(pending))
            result.flagged += bool(changed)

    def record(session: Session) -> None:
        """The new locations, in the transaction that marks the changes done."""
        changes = ChangeSet()
        for loc_id, _source, _uid, target, new_uid in moves:
            session.execute(delete(MessageLocation).where(MessageLocation.id == loc_id))
            target_validity = layout.folders[target].uidvalidity
            if new_uid is not None and target_validity is not None:
                session.execute(
                    insert_for(session, MessageLocation)
                    .values(
                        message_id=message_id,
                        folder_id=target,
                        uidvalidity=target_validity,
                        uid=new_uid,
                    )
                    .on_conflict_do_nothing()
                )
        if expunged:
            session.execute(delete(MessageLocation).where(MessageLocation.id.in_(expunged)))
        # Archive is location bookkeeping: a message that left the Archive folder drops it.
        left_archive = any(layout.folders[s].role == "archive" for s in left)
        if left_archive and not any(
            layout.folders[t].label_id == layout.roles["archive"] for t in targets
        ):
            removed = session.execute(
                delete(MessageLabel).where(
                    MessageLabel.message_id == message_id,
                    MessageLabel.label_id == layout.roles["archive"],
                )
            )
            if removed.rowcount:  # type: ignore[attr-defined]
                changes.emails.add(message_id)
                changes.mailboxes.add(layout.roles["archive"])
        changes.record(session, scope.user_id)

    return Outcome.done(pending, record)


def _all_mail_uid(
    layout: _Layout,
    present: Sequence[tuple[int, int, int]],
    moves: Sequence[tuple[int, int, int, int, int | None]],
) -> tuple[int, int] | None:
    """(All Mail folder, UID) of a Gmail message after its moves; None when not there."""
    all_mail = layout.all_mail
    moved = {source for _l, source, *_rest in moves}
    for _loc, folder, uid in present:
        if folder == all_mail and folder not in moved:
            return folder, uid
    for *_rest, target, new_uid in moves:
        if target == all_mail and new_uid is not None:
            return target, new_uid
    return None


def _propagate_delete(
    conn: ImapConnection,
    store: Store,
    scope: AccountScope,
    layout: _Layout,
    pending: MessageChanges,
    result: PropagationResult,
) -> Outcome:
    """A message no longer stored: expunge every copy if it was deleted forever.

    The copies are searched for by Message-ID: from a ``mid:`` provider id, or, for
    a keyed one (sealed mail), from the delete change's sealed payload
    (``labels.sealed_deletes``); a copy is one with that Message-ID and the size the
    provider id names.
    """
    provider_id = pending.provider_id
    msgid = msgid_of(provider_id)
    if pending.deleted and msgid is not None:
        trash = layout.folder_for_role("trash")
        paths = [info.path for info in layout.folders.values()]
        trash_path = layout.folders[trash].path if trash is not None else None
        result.expunged += delete_forever(conn, paths, trash_path, msgid)
    elif pending.deleted:
        mid, size = _deleted_message_id(store, scope, pending)
        if mid is None or size is None:
            raise CommandError(
                "A message without a Message-ID cannot be found on the server to delete it."
            )
        for info in layout.folders.values():
            conn.select(info.path, readonly=False)
            candidates = conn.search_header("Message-ID", mid)
            if not candidates:
                continue
            envelopes, _failed = fetch_envelopes(conn, candidates)
            hits = [
                uid for uid, env in envelopes.items() if (env.message_id, env.size) == (mid, size)
            ]
            if hits:
                conn.expunge(hits)
                result.expunged += len(hits)
    return Outcome.done(pending)


def _deleted_message_id(
    store: Store, scope: AccountScope, pending: MessageChanges
) -> tuple[str | None, int | None]:
    """(Message-ID, size) of a message deleted forever.

    The size is in every id made from a Message-ID; the Message-ID in a ``mid:`` one,
    else in the delete change's payload, sealed and bound to that change (its keyed
    id may be under a key version a rotation has dropped since: it is not re-hashed).
    """
    provider_id = pending.provider_id
    mid, size = parse_provider_id(provider_id)
    if mid is not None:
        return mid, size
    with store.session() as session:
        for entry in pending.entries:
            if entry.operation != "delete":
                continue
            try:
                mid = open_message_id(session, scope.user_id, entry.id, entry.payload)
            except ConfigError as exc:  # tampered, or its key version is gone
                reason = f"The deleted message's Message-ID does not open: {exc}"
                raise CommandError(reason) from None
            if mid is not None:
                return mid, size_of(provider_id)
    return None, None
