"""The life of a user label: create, rename, move, destroy — and its folders at the providers.

A user label is a JMAP mailbox the user made (or a provider folder discovery
found). :class:`LabelLifecycle` changes labels of one user inside the caller's
session, so a change, its change-log rows and its pending changes commit or
vanish together:

* **create** — a new label under a parent (or at the top); one pending
  ``create_folder`` per account of the user that is not disconnected.
* **update** — rename and/or move under another parent, ``sort_order``,
  ``is_subscribed``. ``path`` is the parent chain joined by ``/``: renaming or
  moving a label rewrites the path of every descendant. A changed path queues
  ``rename_folder`` for each account that has a folder bound to the label (a
  provider RENAME carries the folder's children along).
* **destroy** — refused while the label has children or messages, unless
  ``remove_messages``: messages only in this label are deleted forever, the
  others just lose it (the operations service keeps their location). One
  ``delete_folder`` per folder bound to the label, with the folder's path.

Pending folder changes have no message: ``message_id`` is NULL and the
``provider_id`` is ``label:<label id>``
(:func:`mailroom.providers.base.folder_change_ref`), so the
consumer hands a label's folder changes to the propagator together, in
order. Propagators derive the folder from the label's *current* state (its
path and its parent's folder), so replaying a change, or an older rename after
a newer one, alters nothing.

Rules (each refusal is a :class:`LabelRefused` naming the property):

* a name is 1 to :data:`MAX_NAME_OCTETS` octets of UTF-8 (normalized to NFC,
  leading and trailing white space removed),
  without control characters, without ``/`` (it separates path parts) and
  without the folder separator of any of the user's provider accounts (a
  provider would read it as nesting);
* names are unique among siblings; a top-level name that means a system
  folder (``Inbox``, ``Junk``, ``Sent Items``, ...) is refused, because a
  provider folder of that name would be read back as the system label;
* system labels (those with a role) cannot be renamed, moved or destroyed,
  and have no children (their provider folders differ per account);
* no cycles: a label cannot move under itself or a descendant.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from mailroom.labels.operations import Operations
from mailroom.labels.propagation import wake_after_commit
from mailroom.labels.resolver import role_for_folder_name
from mailroom.labels.roles import SYSTEM_LABELS
from mailroom.providers.base import (
    CREATE_FOLDER,
    DELETE_FOLDER,
    RENAME_FOLDER,
    folder_change_ref,
)
from mailroom.store import changelog
from mailroom.store.models import Account, Folder, Label, MessageLabel, PendingChange

__all__ = ["KEEP", "MAX_NAME_OCTETS", "Keep", "LabelLifecycle", "LabelRefused", "held_folders"]

MAX_NAME_OCTETS = 500

Reason = Literal["invalid", "forbidden", "not_found", "has_children", "has_messages"]


def held_folders(session: Session, account_id: int) -> set[int]:
    """The account's folders whose label was renamed, moved or destroyed, not yet carried.

    Until the provider has the change, its folder still shows the old name (or
    still exists): a sync must leave such a folder's label alone, or it would
    bring the old name back as a new label ("pending local changes win").
    """
    labels: set[int] = set()
    folders: set[int] = set()
    for operation, payload in session.execute(
        select(PendingChange.operation, PendingChange.payload).where(
            PendingChange.account_id == account_id,
            PendingChange.state == "pending",
            PendingChange.message_id.is_(None),
            PendingChange.operation.in_((RENAME_FOLDER, DELETE_FOLDER)),
        )
    ):
        value = (payload or {}).get("folder" if operation == DELETE_FOLDER else "label")
        if isinstance(value, int):
            (folders if operation == DELETE_FOLDER else labels).add(value)
    if labels:
        folders.update(
            session.scalars(
                select(Folder.id).where(
                    Folder.account_id == account_id, Folder.label_id.in_(labels)
                )
            )
        )
    return folders


class LabelRefused(Exception):
    """A label change that breaks a rule; ``reason`` names the rule, ``field`` the property."""

    def __init__(self, reason: Reason, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.field = field


@dataclass(frozen=True, slots=True)
class Keep:
    """Marks an argument of :meth:`LabelLifecycle.update` that stays as it is."""


KEEP = Keep()


class LabelLifecycle:
    """Creates, changes and destroys the labels of one user inside the caller's session."""

    def __init__(self, session: Session, user_id: int) -> None:
        self.session = session
        self.user_id = user_id

    # -- reading -----------------------------------------------------------------

    def label(self, label_id: int) -> Label:
        """The user's label; ``not_found`` for another user's or an unknown one."""
        label = self.session.get(Label, label_id)
        if label is None or label.user_id != self.user_id:
            raise LabelRefused("not_found", f"There is no label {label_id}.")
        return label

    def descendants(self, label: Label) -> list[Label]:
        """Every label below ``label`` (by path), shallowest first."""
        prefix = label.path + "/"
        below = self.session.scalars(
            select(Label).where(
                Label.user_id == self.user_id,
                func.substr(Label.path, 1, len(prefix)) == prefix,
            )
        )
        return sorted(below, key=lambda lb: lb.path.count("/"))

    # -- changing ------------------------------------------------------------------

    def create(
        self,
        name: str,
        parent_id: int | None = None,
        *,
        sort_order: int = 0,
        is_subscribed: bool = True,
    ) -> Label:
        """A new user label; its folder is queued for every connected account."""
        clean = self._valid_name(name)
        parent = self._valid_parent(parent_id)
        path = self._free_path(clean, parent, None)
        label = Label(
            user_id=self.user_id,
            name=clean,
            path=path,
            parent_id=parent.id if parent else None,
            role=None,
            sort_order=sort_order,
            is_subscribed=is_subscribed,
        )
        self.session.add(label)
        self.session.flush()
        accounts = list(
            self.session.scalars(
                select(Account.id).where(
                    Account.user_id == self.user_id, Account.status != "disconnected"
                )
            )
        )
        self._queue(accounts, label.id, CREATE_FOLDER, {"label": label.id})
        return label

    def update(
        self,
        label_id: int,
        *,
        name: str | Keep = KEEP,
        parent_id: int | None | Keep = KEEP,
        sort_order: int | Keep = KEEP,
        is_subscribed: bool | Keep = KEEP,
    ) -> Label:
        """Rename, move, reorder or (un)subscribe a label; idempotent."""
        label = self.label(label_id)
        new_name = label.name if isinstance(name, Keep) else self._valid_name(name)
        new_parent_id = label.parent_id if isinstance(parent_id, Keep) else parent_id
        if (new_name, new_parent_id) != (label.name, label.parent_id):
            if label.role is not None:
                raise LabelRefused(
                    "forbidden",
                    "A system mailbox cannot be renamed or moved.",
                    "name" if new_name != label.name else "parentId",
                )
            parent = self._valid_parent(new_parent_id, moving=label)
            self._move(label, new_name, parent)
        listed = False
        if not isinstance(sort_order, Keep) and sort_order != label.sort_order:
            label.sort_order = sort_order
            listed = True
        if not isinstance(is_subscribed, Keep) and is_subscribed != label.is_subscribed:
            label.is_subscribed = is_subscribed
            listed = True
        self.session.flush()
        if listed:  # the label triggers log name, parent and role changes only
            changelog.record(self.session, self.user_id, "Mailbox", [label.id], "updated")
        return label

    def destroy(self, label_id: int, *, remove_messages: bool = False) -> list[int]:
        """Delete a label (and its folders); returns the messages deleted forever with it."""
        label = self.label(label_id)
        if label.role is not None:
            raise LabelRefused("forbidden", "A system mailbox cannot be destroyed.")
        if self.session.scalar(select(Label.id).where(Label.parent_id == label.id).limit(1)):
            raise LabelRefused("has_children", "The mailbox still has child mailboxes.")
        members = list(
            self.session.scalars(
                select(MessageLabel.message_id).where(MessageLabel.label_id == label.id)
            )
        )
        deleted: list[int] = []
        if members:
            if not remove_messages:
                raise LabelRefused("has_messages", "The mailbox still has emails in it.")
            deleted = self._remove_messages(label.id, members)
        for account_id, folder_id, path in self.session.execute(
            select(Folder.account_id, Folder.id, Folder.path).where(Folder.label_id == label.id)
        ):
            payload = {"label": label.id, "folder": folder_id, "path": path}
            self._queue([account_id], label.id, DELETE_FOLDER, payload)
        self.session.delete(label)
        self.session.flush()
        return deleted

    # -- rules -------------------------------------------------------------------

    def _valid_name(self, name: object) -> str:
        if not isinstance(name, str):
            raise LabelRefused("invalid", "The name must be a string.", "name")
        # Trimmed like folder names are when discovery reads them back (resolver.resolve_path).
        clean = unicodedata.normalize("NFC", name).strip()
        if not clean:
            raise LabelRefused("invalid", "The name must not be empty.", "name")
        if len(clean.encode("utf-8")) > MAX_NAME_OCTETS:
            raise LabelRefused(
                "invalid", f"The name is longer than {MAX_NAME_OCTETS} octets.", "name"
            )
        if any(unicodedata.category(ch) == "Cc" for ch in clean):
            raise LabelRefused("invalid", "The name must not contain control characters.", "name")
        for separator in sorted(self._separators()):
            if separator in clean:
                raise LabelRefused(
                    "invalid",
                    f"The name must not contain {separator!r}: it separates nested "
                    "mailboxes here or at a provider.",
                    "name",
                )
        return clean

    def _separators(self) -> set[str]:
        delimiters = self.session.scalars(
            select(Folder.delimiter)
            .join(Account, Account.id == Folder.account_id)
            .where(Account.user_id == self.user_id, Folder.delimiter.is_not(None))
            .distinct()
        )
        return {"/"} | {d for d in delimiters if d}

    def _valid_parent(self, parent_id: int | None, moving: Label | None = None) -> Label | None:
        if parent_id is None:
            return None
        try:
            parent = self.label(parent_id)
        except LabelRefused:
            raise LabelRefused(
                "invalid", "The parent mailbox does not exist.", "parentId"
            ) from None
        if parent.role is not None:
            raise LabelRefused(
                "forbidden", "A system mailbox cannot have child mailboxes.", "parentId"
            )
        if moving is not None and (
            parent.id == moving.id or parent.path.startswith(moving.path + "/")
        ):
            raise LabelRefused(
                "invalid", "A mailbox cannot move under itself or its own child.", "parentId"
            )
        return parent

    def _free_path(self, name: str, parent: Label | None, label: Label | None) -> str:
        if parent is None and (
            role_for_folder_name(name) is not None
            or name.strip().lower() in {n.lower() for n in SYSTEM_LABELS.values()}
        ):
            raise LabelRefused(
                "invalid", f"{name!r} is the name of a system mailbox at the top level.", "name"
            )
        path = f"{parent.path}/{name}" if parent else name
        taken = self.session.scalar(
            select(Label.id).where(
                Label.user_id == self.user_id,
                (Label.path == path)
                | ((Label.name == name) & _same_parent(parent.id if parent else None)),
            )
        )
        if taken is not None and (label is None or taken != label.id):
            raise LabelRefused("invalid", f"A mailbox named {name!r} already exists there.", "name")
        return path

    # -- mechanics -----------------------------------------------------------------

    def _move(self, label: Label, name: str, parent: Label | None) -> None:
        """Give the label a new name and parent; every descendant's path follows."""
        old = label.path
        new = self._free_path(name, parent, label)
        below = self.descendants(label)
        label.name, label.parent_id, label.path = name, parent.id if parent else None, new
        self.session.flush()
        for child in below:
            child.path = new + child.path[len(old) :]
            self.session.flush()
        if new != old:
            accounts = sorted(
                set(
                    self.session.scalars(
                        select(Folder.account_id).where(Folder.label_id == label.id)
                    )
                )
            )
            self._queue(accounts, label.id, RENAME_FOLDER, {"label": label.id, "from": old})

    def _remove_messages(self, label_id: int, members: list[int]) -> list[int]:
        """Take the label off its messages; those in no other label are deleted forever."""
        elsewhere = set(
            self.session.scalars(
                select(MessageLabel.message_id).where(
                    MessageLabel.message_id.in_(members), MessageLabel.label_id != label_id
                )
            )
        )
        only_here = sorted(set(members) - elsewhere)
        ops = Operations(self.session, self.user_id)
        if elsewhere:
            ops.change_labels(sorted(elsewhere), [], [label_id], "unlabel")
        return ops.delete_forever(only_here) if only_here else []

    def _queue(
        self, account_ids: Iterable[int], label_id: int, operation: str, payload: dict[str, object]
    ) -> None:
        accounts = list(account_ids)
        for account_id in accounts:
            self.session.add(
                PendingChange(
                    account_id=account_id,
                    message_id=None,
                    provider_id=folder_change_ref(label_id),
                    operation=operation,
                    payload=payload,
                )
            )
        if accounts:
            self.session.flush()
            wake_after_commit(self.session, accounts)


def _same_parent(parent_id: int | None) -> ColumnElement[bool]:
    return Label.parent_id.is_(None) if parent_id is None else Label.parent_id == parent_id
