"""Folder discovery: the server's folders become ``Folder`` rows bound to the user's labels.

Runs before any message sync, so a folder another client created exists (with
its label chain) before a message tries to resolve into it.

* ``LIST "" "*"`` gives names, delimiters and RFC 6154 special-use attributes.
  ``\\Sent``, ``\\Drafts``, ``\\Trash``, ``\\Junk`` and ``\\Archive`` (and INBOX)
  bind to the user's system labels whatever the folder is called; other folders
  resolve by name through :mod:`mailroom.labels.resolver` (nested names become
  parent chains, a lone "Spam" or "Gesendet" still means the system label).
* ``\\All``, ``\\Flagged`` and ``\\Important`` are views over other folders (Gmail's
  "All Mail", "Starred"): they are recorded but not synced, so a message is not
  located twice. ``\\Noselect`` folders hold no messages.
* A server with Gmail's extensions (:mod:`.gmail_ext`) turns this around: All Mail,
  Spam and Trash are synced and every other folder is a view of All Mail (its
  label and binding exist, its messages come through ``X-GM-LABELS``). Views with
  no label of their own (All Mail, Starred, Important, ``[Gmail]``) get none. A
  label folder that vanished takes its label off the account's messages, and a
  change in the label folders makes the next change scan re-read every message's
  labels (:mod:`.gmail_folders`).
* A folder that disappeared from LIST while a new one appeared with the same
  UIDVALIDITY was **renamed** (servers keep UIDs across RENAME): the row keeps its
  id, marks and locations and moves to the label of its new name. Otherwise a
  vanished folder was **deleted**: its locations go (its messages are judged at
  the end of the sync — they may live on elsewhere) and so does its row.
* A folder whose label was renamed, moved or destroyed in mailroom keeps its
  label until that change reached the server (``labels.lifecycle.held_folders``):
  the old name it still has must not come back as a new label.
* Each label is bound (``LabelBinding``) to one folder of the account: the
  special-use folder if there is one, else the shortest path. Labels a rename or
  delete left unused (no folder, binding, message or child, no system role) are
  deleted.

Import order (:data:`RANK`): Inbox, Sent, Drafts, user folders, Archive, Spam, Trash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from mailroom.ingest.mirror import (
    AccountScope,
    ChangeSet,
    insert_for,
    located_under,
    remove_locations,
)
from mailroom.labels.lifecycle import held_folders
from mailroom.labels.resolver import bind, resolve_path, role_for_folder_name, system_label
from mailroom.labels.unused import drop_unused_labels
from mailroom.providers.imap import gmail_ext
from mailroom.providers.imap.connection import ImapConnection, ListedFolder
from mailroom.providers.imap.gmail_folders import forget_label, rescan_labels
from mailroom.store.bulk import insert_or_get
from mailroom.store.models import (
    Folder,
    Label,
    LabelBinding,
    MessageLabel,
    MessageLocation,
    utcnow,
)

__all__ = [
    "RANK",
    "DiscoveryResult",
    "discover",
    "folder_label",
    "folder_rank",
    "syncable_folders",
]

SPECIAL_USE_ROLES = {
    "\\sent": "sent",
    "\\drafts": "drafts",
    "\\trash": "trash",
    "\\junk": "spam",
    "\\archive": "archive",
}
VIEW_FLAGS = frozenset({"\\all", "\\flagged", "\\important"})
FOLDERLESS_ROLES = frozenset({"snoozed", "starred"})
RANK = {"inbox": 0, "sent": 1, "drafts": 2, None: 3, "archive": 4, "spam": 5, "trash": 6}


@dataclass
class DiscoveryResult:
    """What discovery found and changed."""

    created: list[int] = field(default_factory=list)
    renamed: list[int] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    affected_messages: set[int] = field(default_factory=set)

    @property
    def changed(self) -> bool:
        """Whether the folder structure changed."""
        return bool(self.created or self.renamed or self.deleted)


def _special_use(listed: ListedFolder) -> str | None:
    for flag in sorted(listed.flags):
        lower = flag.lower()
        if lower in SPECIAL_USE_ROLES or lower in VIEW_FLAGS:
            return flag
    return None


def _parts(path: str, delimiter: str | None) -> list[str]:
    parts = path.split(delimiter) if delimiter else [path]
    if len(parts) > 1 and parts[0].upper() == "INBOX":
        parts = parts[1:]  # INBOX-prefixed namespaces (Courier, Cyrus): INBOX.Work is "Work"
    return parts


def folder_role(path: str, delimiter: str | None, special_use: str | None) -> str | None:
    """The system role a folder stands for (special-use first, then INBOX, then its name)."""
    if special_use and special_use.lower() in SPECIAL_USE_ROLES:
        return SPECIAL_USE_ROLES[special_use.lower()]
    if path.upper() == "INBOX":
        return "inbox"
    parts = _parts(path, delimiter)
    return role_for_folder_name(parts[0]) if len(parts) == 1 else None


def folder_rank(folder: Folder) -> tuple[int, str]:
    """Sort key for import order: Inbox, Sent, Drafts, user folders, Archive, Spam, Trash."""
    return RANK.get(folder_role(folder.path, folder.delimiter, folder.special_use), 3), folder.path


def _is_view(special_use: str | None) -> bool:
    return bool(special_use) and special_use.lower() in VIEW_FLAGS  # type: ignore[union-attr]


def syncable(folder: Folder) -> bool:
    """Whether a folder's messages are synced (selectable and not a view)."""
    state = folder.state or {}
    if not state.get("selectable", True):
        return False
    gmail = gmail_ext.synced(folder)
    return gmail if gmail is not None else not _is_view(folder.special_use)


def syncable_folders(session: Session, account_id: int) -> list[Folder]:
    """The account's folders that hold synced messages, in import order."""
    folders = [
        f
        for f in session.scalars(select(Folder).where(Folder.account_id == account_id))
        if syncable(f)
    ]
    return sorted(folders, key=folder_rank)


def folder_label(session: Session, user_id: int, path: str, delimiter: str | None) -> int:
    """The label an ordinary folder (no special use) of this path stands for."""
    return _label_for(session, user_id, path, delimiter, None)


def _gmail_label_for(
    session: Session, user_id: int, listed: ListedFolder, special: str | None
) -> int | None:
    """The label of a folder of a Gmail account: views of their own have none."""
    if not listed.selectable or _is_view(special):
        return None
    return _label_for(session, user_id, listed.name, listed.delimiter, special)


def _label_for(
    session: Session, user_id: int, path: str, delimiter: str | None, special: str | None
) -> int:
    role = folder_role(path, delimiter, special)
    if special and special.lower() in SPECIAL_USE_ROLES or path.upper() == "INBOX":
        assert role is not None
        return system_label(session, user_id, role).id
    parts = _parts(path, delimiter)
    label = resolve_path(session, user_id, parts)
    if label.role in FOLDERLESS_ROLES:
        # Snoozed and Starred never live in a provider folder; a folder with that name
        # gets a label of its own.
        label = resolve_path(session, user_id, [*parts[:-1], f"{parts[-1]} (IMAP)"])
    return label.id


def _relabel(
    session: Session, scope: AccountScope, changes: ChangeSet, folder: Folder, label_id: int
) -> None:
    old = folder.label_id
    if old == label_id:
        return
    folder.label_id = label_id
    scope.folder_labels[folder.id] = label_id
    session.flush()
    ids = sorted(
        set(
            session.scalars(
                select(MessageLocation.message_id).where(MessageLocation.folder_id == folder.id)
            )
        )
    )
    if not ids:
        return
    session.execute(
        insert_for(session, MessageLabel)
        .values([{"message_id": m, "label_id": label_id} for m in ids])
        .on_conflict_do_nothing()
    )
    changes.emails.update(ids)
    changes.mailboxes.add(label_id)
    if old is not None:
        still = located_under(old)
        session.execute(
            delete(MessageLabel).where(
                MessageLabel.label_id == old, MessageLabel.message_id.in_(ids), ~still
            )
        )
        changes.mailboxes.add(old)


def discover(
    session: Session, conn: ImapConnection, scope: AccountScope, changes: ChangeSet
) -> DiscoveryResult:
    """Bring the account's ``Folder`` rows, labels and bindings in line with LIST."""
    result = DiscoveryResult()
    gmail = gmail_ext.speaks_gmail(conn)
    listed = {lf.name: lf for lf in conn.list_folders()}
    existing = {
        f.path: f
        for f in session.scalars(select(Folder).where(Folder.account_id == scope.account_id))
    }
    gone = [f for path, f in existing.items() if path not in listed]
    new = [lf for name, lf in listed.items() if name not in existing]
    stale_labels: set[int] = set()
    held = held_folders(session, scope.account_id)

    # Renames: a vanished folder and a new one with the same UIDVALIDITY.
    if gone and new:
        by_validity = {f.uidvalidity: f for f in gone if f.uidvalidity}
        for lf in list(new):
            if not lf.selectable or not by_validity:
                continue
            validity = conn.status(lf.name).get("UIDVALIDITY")
            folder = by_validity.pop(validity, None) if validity else None
            if folder is None:
                continue
            gone.remove(folder)
            new.remove(lf)
            del existing[folder.path]
            folder.path = lf.name
            existing[lf.name] = folder
            result.renamed.append(folder.id)
    session.flush()

    for folder in gone:
        result.affected_messages |= remove_locations(session, scope, changes, folder.id)
        if gmail and folder.label_id is not None and gmail_ext.synced(folder) is False:
            label = session.get(Label, folder.label_id)
            if label is not None and label.role is None:  # a label Gmail no longer has
                forget_label(session, scope, changes, folder.label_id)
        if folder.label_id is not None:
            stale_labels.add(folder.label_id)
        scope.folder_labels.pop(folder.id, None)
        result.deleted.append(folder.path)
        existing.pop(folder.path, None)
        session.delete(folder)
    session.flush()

    for lf in new:
        special = _special_use(lf)
        state: dict[str, Any] = (
            {"selectable": True} if lf.selectable else {"selectable": False, "import_floor_uid": 1}
        )
        if gmail:
            state[gmail_ext.STATE_KEY] = True
        a_view = not _gmail_synced(special) if gmail else _is_view(special)
        if a_view:  # never synced: no history to import
            state = {**state, "import_floor_uid": 1}
        label_id = (
            _gmail_label_for(session, scope.user_id, lf, special)
            if gmail
            else _label_for(session, scope.user_id, lf.name, lf.delimiter, special)
        )
        # Insert-or-get: two first syncs of a new account may discover it at the same time;
        # the loser takes the winner's row as an existing folder.
        folder_id, created = insert_or_get(
            session,
            Folder,
            {
                "account_id": scope.account_id,
                "path": lf.name,
                "delimiter": lf.delimiter,
                "special_use": special,
                "label_id": label_id,
                "state": state,
                "created_at": utcnow(),
            },
            ("account_id", "path"),
        )
        folder = session.get_one(Folder, folder_id)
        existing[lf.name] = folder
        scope.folder_labels[folder.id] = folder.label_id  # type: ignore[assignment]
        if created:
            result.created.append(folder.id)

    for name, folder in existing.items():
        lf = listed[name]
        special = _special_use(lf)
        folder.delimiter = lf.delimiter
        if folder.special_use != special:
            folder.special_use = special
        state = dict(folder.state or {})
        if state.get("selectable", True) != lf.selectable:
            state["selectable"] = lf.selectable
            if not lf.selectable:
                state["import_floor_uid"] = 1
            folder.state = state
        if folder.id in held:
            continue  # its label's rename or destroy is on its way to the server
        if gmail:
            label_id = _gmail_label_for(session, scope.user_id, lf, special)
        else:
            label_id = _label_for(session, scope.user_id, folder.path, folder.delimiter, special)
        if label_id is not None and folder.label_id != label_id:
            if folder.label_id is not None:
                stale_labels.add(folder.label_id)
            _relabel(session, scope, changes, folder, label_id)
    session.flush()

    if gmail and (gone or new):
        rescan_labels(session, scope.account_id)
    _bind(session, scope.account_id, list(existing.values()))
    if stale_labels:
        drop_unused_labels(session, stale_labels)
    return result


def _gmail_synced(special: str | None) -> bool:
    return bool(special) and str(special).lower() in gmail_ext.SYNCED_SPECIAL_USE


def _bind(session: Session, account_id: int, folders: list[Folder]) -> None:
    """One binding per label, to its special-use folder or else its shortest path."""
    primary: dict[int, Folder] = {}
    for folder in sorted(
        folders,
        key=lambda f: (f.special_use is None or _is_view(f.special_use), len(f.path), f.path),
    ):
        if folder.label_id is None or _is_view(folder.special_use):
            continue
        primary.setdefault(folder.label_id, folder)
    wanted = {(label_id, folder.path) for label_id, folder in primary.items()}
    for binding in session.scalars(
        select(LabelBinding).where(LabelBinding.account_id == account_id)
    ):
        if (binding.label_id, binding.provider_ref) not in wanted:
            session.delete(binding)
    session.flush()
    for label_id, folder in primary.items():
        bind(session, label_id, account_id, folder.path)
