"""Gmail's labels as mailroom labels: the label list first, then each message's label ids.

============================ =============================================================
Gmail label id               mailroom
============================ =============================================================
``INBOX`` ``SENT`` ``DRAFT``  the Inbox, Sent and Drafts labels
``SPAM`` ``TRASH``            the Spam and Trash labels
``STARRED``                   the Starred label (a flag, mirrored by ``ingest.mirror``)
``UNREAD``                    *seen* (its absence): ``seen_at``
``IMPORTANT``                 no label; handed to the pipeline as a provider label
``CATEGORY_*``                a label bound to the category id: it decides the tab (SPEC §5)
``Label_12`` "Work/Tax"       the user label ``Work/Tax`` (a parent chain), and a folder row
============================ =============================================================

Every Gmail label that becomes a mailroom label gets a **binding** (the Gmail
label id is its ``provider_ref``). User labels also get a :class:`Folder` row
(path = the Gmail name, ``/`` nested, ``state["gmail_label"]`` = the id): that is
what :class:`~mailroom.labels.lifecycle.LabelLifecycle` queues renames and
deletions for. No message is *located* in these folders; Gmail keeps a message
once and its labels decide where it shows (:mod:`.mirror`).

A message with no place label (no Inbox, Sent, Drafts, Spam, Trash or user
label) is archived: it carries the Archive label.

:func:`sync_labels` reads Gmail's label list into labels, bindings and folders:
a label renamed in Gmail moves its messages to the label of the new name, one
deleted in Gmail leaves the account's messages. A folder whose label has a
rename or deletion not yet carried to Gmail (``held_folders``) is left alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from mailroom.ingest.mirror import AccountScope, ChangeSet, insert_for
from mailroom.labels.lifecycle import held_folders
from mailroom.labels.resolver import bind, resolve_path, system_label
from mailroom.labels.unused import drop_unused_labels
from mailroom.providers.gmail.resources import Label as GmailLabel
from mailroom.store.models import Folder, LabelBinding, Message, MessageLabel

__all__ = [
    "CATEGORY_PREFIX",
    "CHAT",
    "DELIMITER",
    "FOLDER_KEY",
    "STARRED",
    "SYSTEM_ROLES",
    "UNREAD",
    "LabelMap",
    "gmail_label_of",
    "load_label_map",
    "sync_labels",
]

DELIMITER = "/"
FOLDER_KEY = "gmail_label"  # Folder.state key holding the Gmail label id
CATEGORY_PREFIX = "CATEGORY_"
STARRED = "STARRED"
UNREAD = "UNREAD"
CHAT = "CHAT"
SYSTEM_ROLES = {
    "INBOX": "inbox",
    "SENT": "sent",
    "DRAFT": "drafts",
    "SPAM": "spam",
    "TRASH": "trash",
}


@dataclass(frozen=True)
class LabelMap:
    """Gmail label id → mailroom label id for one account, and what that implies."""

    by_gmail: dict[str, int]
    categories: frozenset[int]  # mailroom labels bound to CATEGORY_* ids
    archive: int
    starred: int

    @property
    def held(self) -> frozenset[int]:
        """The mailroom labels whose membership Gmail decides (Starred goes with the flags)."""
        return frozenset(self.by_gmail.values()) | {self.archive}

    @property
    def by_label(self) -> dict[int, str]:
        """mailroom label id → Gmail label id."""
        return {label: gmail for gmail, label in self.by_gmail.items()}

    def labels_for(self, gmail_ids: Iterable[str]) -> set[int]:
        """The held mailroom labels a message with these Gmail label ids carries."""
        found = {self.by_gmail[g] for g in gmail_ids if g in self.by_gmail}
        if not found - self.categories:
            found.add(self.archive)
        return found


def gmail_label_of(folder: Folder) -> str | None:
    """The Gmail label id a folder row stands for, if it is a Gmail label folder."""
    value = (folder.state or {}).get(FOLDER_KEY)
    return str(value) if value else None


def load_label_map(session: Session, account_id: int, user_id: int) -> LabelMap:
    """The account's label map from its bindings."""
    rows = session.execute(
        select(LabelBinding.provider_ref, LabelBinding.label_id).where(
            LabelBinding.account_id == account_id
        )
    ).all()
    by_gmail = {str(ref): int(label) for ref, label in rows}
    return LabelMap(
        by_gmail=by_gmail,
        categories=frozenset(
            label for ref, label in by_gmail.items() if ref.startswith(CATEGORY_PREFIX)
        ),
        archive=system_label(session, user_id, "archive").id,
        starred=system_label(session, user_id, "starred").id,
    )


def _parts(name: str) -> list[str]:
    return [part for part in name.split(DELIMITER) if part.strip()]


def _user_label(session: Session, user_id: int, name: str) -> int:
    label = resolve_path(session, user_id, _parts(name) or [name])
    if label.role in ("starred", "snoozed"):  # never a place: a label of its own
        label = resolve_path(session, user_id, [f"{name} (Gmail)"])
    return label.id


def sync_labels(
    session: Session, scope: AccountScope, changes: ChangeSet, labels: Sequence[GmailLabel]
) -> None:
    """Make the account's labels, bindings and label folders follow Gmail's label list."""
    account_id, user_id = scope.account_id, scope.user_id
    for label in labels:
        gmail_id = str(label.get("id", ""))
        role = SYSTEM_ROLES.get(gmail_id)
        if role is not None:
            bind(session, system_label(session, user_id, role).id, account_id, gmail_id)
        elif gmail_id.startswith(CATEGORY_PREFIX):
            bind(session, resolve_path(session, user_id, [gmail_id]).id, account_id, gmail_id)
    folders: dict[str, Folder] = {}
    for folder in session.scalars(select(Folder).where(Folder.account_id == account_id)):
        if (found := gmail_label_of(folder)) is not None:
            folders[found] = folder
    held = held_folders(session, account_id)
    listed: set[str] = set()
    for label in labels:
        if label.get("type") != "user":
            continue
        gmail_id, name = str(label.get("id", "")), str(label.get("name", "")).strip()
        if not gmail_id or not name:
            continue
        listed.add(gmail_id)
        known = folders.get(gmail_id)
        if known is not None and known.id in held:
            continue  # mailroom renamed or destroyed it; the propagator carries that first
        if known is None:
            label_id = _user_label(session, user_id, name)
            add_label_folder(session, account_id, gmail_id, name, label_id)
        elif known.path != name or known.label_id is None:
            _renamed(session, scope, changes, known, gmail_id, name)
    for gmail_id, known in folders.items():
        if gmail_id not in listed and known.id not in held:
            _deleted(session, scope, changes, known, gmail_id)
    session.flush()


def add_label_folder(
    session: Session, account_id: int, gmail_id: str, name: str, label_id: int
) -> Folder:
    """Bind a mailroom label to a Gmail user label and record its folder row."""
    bind(session, label_id, account_id, gmail_id)
    folder = session.scalar(
        select(Folder).where(Folder.account_id == account_id, Folder.path == name)
    )
    if folder is None:
        folder = Folder(account_id=account_id, path=name, delimiter=DELIMITER)
        session.add(folder)
    folder.label_id = label_id
    folder.state = {"selectable": True, FOLDER_KEY: gmail_id}
    session.flush()
    return folder


def _renamed(
    session: Session,
    scope: AccountScope,
    changes: ChangeSet,
    folder: Folder,
    gmail_id: str,
    name: str,
) -> None:
    """A label renamed in Gmail: its messages move to the label of the new name."""
    old = folder.label_id
    new = _user_label(session, scope.user_id, name)
    clash = session.scalar(
        select(Folder).where(
            Folder.account_id == scope.account_id, Folder.path == name, Folder.id != folder.id
        )
    )
    if clash is not None:
        session.delete(clash)
        session.flush()
    folder.path, folder.label_id = name, new
    bind(session, new, scope.account_id, gmail_id)
    if old is not None and old != new:
        ids = _account_members(session, scope.account_id, old)
        if ids:
            # An insert and a delete, not an UPDATE: the thread-label triggers see those.
            session.execute(
                insert_for(session, MessageLabel)
                .values([{"message_id": m, "label_id": new} for m in ids])
                .on_conflict_do_nothing()
            )
            session.execute(
                delete(MessageLabel).where(
                    MessageLabel.label_id == old, MessageLabel.message_id.in_(ids)
                )
            )
            changes.emails.update(ids)
            changes.mailboxes.update({old, new})
        drop_unused_labels(session, {old})
    session.flush()


def _deleted(
    session: Session, scope: AccountScope, changes: ChangeSet, folder: Folder, gmail_id: str
) -> None:
    """A label deleted in Gmail: the account's messages lose it, its folder and binding go."""
    label_id = folder.label_id
    session.delete(folder)
    session.execute(
        delete(LabelBinding).where(
            LabelBinding.account_id == scope.account_id, LabelBinding.provider_ref == gmail_id
        )
    )
    if label_id is not None:
        ids = _account_members(session, scope.account_id, label_id)
        if ids:
            session.execute(
                delete(MessageLabel).where(
                    MessageLabel.label_id == label_id, MessageLabel.message_id.in_(ids)
                )
            )
            changes.emails.update(ids)
            changes.mailboxes.add(label_id)
        session.flush()
        drop_unused_labels(session, {label_id})


def _account_members(session: Session, account_id: int, label_id: int) -> list[int]:
    return sorted(
        session.scalars(
            select(MessageLabel.message_id)
            .join(Message, Message.id == MessageLabel.message_id)
            .where(MessageLabel.label_id == label_id, Message.account_id == account_id)
        )
    )
