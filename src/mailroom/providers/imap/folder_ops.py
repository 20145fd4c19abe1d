"""Folder changes at an IMAP server: CREATE, RENAME and DELETE for the user's labels.

The label lifecycle (:mod:`mailroom.labels.lifecycle`) queues a folder change
per account when a user label is created, renamed or moved, or destroyed; the
consumer hands a label's folder changes to :class:`ImapPropagator`, which calls
:func:`propagate_folder_change`. Like the message changes it works **from the
current state**, never from the operation names, so a replay changes nothing:

* the label still exists → its folder should be at :func:`target_path`: the
  folder of its parent in this account (or the parent's own target) plus the
  account's delimiter plus the label's name; a top-level label goes under
  ``INBOX<delimiter>`` where every folder of the account lives below INBOX
  (Courier and Cyrus namespaces), else at the top.

  - The account has a folder bound to the label elsewhere → ``RENAME`` it (the
    server moves the children along); the folder rows and bindings of it and
    of every folder below it get the new paths.
  - It has none and a create was asked → ``CREATE`` the folder (nothing if the
    server lists it already) and record it as a ``Folder`` row bound to the
    label with a ``label_bindings`` row, so the next discovery finds the label
    by the folder's path instead of making a second one.
* a label name containing the account's delimiter cannot be a folder there (the
  server would nest it): a ``retry``, ending ``failed``;
* the label is gone (destroyed) → ``DELETE`` the folder named in the change
  (its id and path), if the server still lists it, and drop its row. INBOX and
  special-use folders are never deleted.

The bookkeeping is the outcome's ``record``, written in the transaction that
marks the changes done. A server refusal (``NO``) is a ``retry``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from mailroom.errors import ProviderError
from mailroom.labels.resolver import bind
from mailroom.providers.base import CREATE_FOLDER, DELETE_FOLDER, MessageChanges, Outcome
from mailroom.providers.imap.connection import CommandError, ImapConnection, ListedFolder
from mailroom.providers.imap.gmail_ext import speaks_gmail
from mailroom.providers.imap.gmail_folders import view_state
from mailroom.store.engine import Store
from mailroom.store.models import Folder, Label, LabelBinding, utcnow

__all__ = ["FolderPlan", "propagate_folder_change", "server_delimiter", "target_path"]

DEFAULT_DELIMITER = "/"


@dataclass(frozen=True, slots=True)
class _FolderRow:
    id: int
    path: str
    label_id: int | None
    special_use: str | None


@dataclass(frozen=True, slots=True)
class FolderPlan:
    """What the account's folder of a label should become (read in one session)."""

    delimiter: str
    folders: tuple[_FolderRow, ...]
    current: _FolderRow | None  # the folder bound to the label now
    target: str | None  # where it should be; None when the label is gone
    name: str | None  # the label's name; None when it is gone


def server_delimiter(listed: list[ListedFolder]) -> str:
    """The hierarchy delimiter the server uses: INBOX's, else any folder's, else ``/``."""
    for folder in sorted(listed, key=lambda f: f.name.upper() != "INBOX"):
        if folder.delimiter:
            return folder.delimiter
    return DEFAULT_DELIMITER


def target_path(
    session: Session, account_id: int, label: Label, delimiter: str, folders: list[_FolderRow]
) -> str:
    """The folder path the label should have in this account (module docstring)."""
    if label.parent_id is not None:
        parent_folder = _bound(folders, label.parent_id)
        if parent_folder is not None:
            return f"{parent_folder.path}{delimiter}{label.name}"
        parent = session.get(Label, label.parent_id)
        if parent is not None:
            above = target_path(session, account_id, parent, delimiter, folders)
            return f"{above}{delimiter}{label.name}"
    others = [f.path for f in folders if f.path.upper() != "INBOX"]
    below_inbox = bool(others) and all(p.upper().startswith("INBOX" + delimiter) for p in others)
    return f"INBOX{delimiter}{label.name}" if below_inbox else label.name


def _bound(folders: list[_FolderRow], label_id: int) -> _FolderRow | None:
    """The label's folder: the special-use one if any, else the shortest path."""
    candidates = [f for f in folders if f.label_id == label_id]
    candidates.sort(key=lambda f: (f.special_use is None, len(f.path), f.path))
    return candidates[0] if candidates else None


def plan(store: Store, account_id: int, label_id: int, delimiter: str) -> FolderPlan:
    """Read what the label's folder in this account is and should be."""
    with store.session() as session:
        folders = [
            _FolderRow(f.id, f.path, f.label_id, f.special_use)
            for f in session.scalars(select(Folder).where(Folder.account_id == account_id))
        ]
        label = session.get(Label, label_id)
        target = (
            target_path(session, account_id, label, delimiter, folders)
            if label is not None
            else None
        )
        name = label.name if label is not None else None
        return FolderPlan(delimiter, tuple(folders), _bound(folders, label_id), target, name)


def propagate_folder_change(
    conn: ImapConnection, store: Store, account_id: int, changes: MessageChanges
) -> Outcome:
    """Carry one label's folder changes (module docstring); idempotent."""
    label_id = changes.folder_label
    assert label_id is not None
    server = conn.list_folders()
    listed = {folder.name for folder in server}
    wanted = plan(store, account_id, label_id, server_delimiter(server))
    if wanted.target is None:
        return _delete(conn, changes, wanted, listed)
    if wanted.name is not None and wanted.delimiter in wanted.name:
        # The lifecycle refuses such names once a sync has seen the delimiter; for an
        # account never synced it could not tell. The server would nest the name.
        return Outcome.retry(
            changes, f"The name {wanted.name!r} contains this server's folder delimiter."
        )
    if wanted.current is not None:
        if wanted.current.path == wanted.target:
            return Outcome.done(changes)
        return _rename(conn, changes, account_id, wanted, wanted.current.path, wanted.target)
    if not any(e.operation == CREATE_FOLDER for e in changes.entries):
        return Outcome.done(changes)  # nothing to rename; the create was not for this account
    return _create(conn, changes, account_id, label_id, wanted, wanted.target, listed)


def _create(
    conn: ImapConnection,
    changes: MessageChanges,
    account_id: int,
    label_id: int,
    wanted: FolderPlan,
    path: str,
    listed: set[str],
) -> Outcome:
    if path not in listed:
        conn.create_folder(path)
    validity = conn.status(path).get("UIDVALIDITY")

    def record(session: Session) -> None:
        folder = session.scalar(
            select(Folder).where(Folder.account_id == account_id, Folder.path == path)
        )
        if folder is None:
            folder = Folder(
                account_id=account_id,
                path=path,
                delimiter=wanted.delimiter,
                label_id=label_id,
                uidvalidity=validity,
                state=view_state() if speaks_gmail(conn) else {"selectable": True},
                created_at=utcnow(),
            )
            session.add(folder)
        else:
            folder.label_id = label_id
        session.flush()
        if session.get(Label, label_id) is not None:
            bind(session, label_id, account_id, path)

    return Outcome.done(changes, record)


def _rename(
    conn: ImapConnection,
    changes: MessageChanges,
    account_id: int,
    wanted: FolderPlan,
    old: str,
    new: str,
) -> Outcome:
    with conn.guard(f"renaming the folder {old!r} to {new!r}"):
        conn.client.rename_folder(old, new)
    # Subscriptions are not renamed by every server; a missing one is harmless.
    with contextlib.suppress(ProviderError), conn.guard("subscribing"):
        conn.client.unsubscribe_folder(old)
    with contextlib.suppress(ProviderError), conn.guard("subscribing"):
        conn.client.subscribe_folder(new)
    prefix = old + wanted.delimiter
    moved = {
        f.id: new + f.path[len(old) :]
        for f in wanted.folders
        if f.path == old or f.path.startswith(prefix)
    }
    if conn.selected is not None and (conn.selected == old or conn.selected.startswith(prefix)):
        conn.selected = None  # select it again by its new name

    def record(session: Session) -> None:
        for folder_id, path in moved.items():
            folder = session.get(Folder, folder_id)
            if folder is not None:
                folder.path = path
        for binding in session.scalars(
            select(LabelBinding).where(LabelBinding.account_id == account_id)
        ):
            ref = binding.provider_ref
            if ref == old or ref.startswith(prefix):
                binding.provider_ref = new + ref[len(old) :]

    return Outcome.done(changes, record)


def _delete(
    conn: ImapConnection, changes: MessageChanges, wanted: FolderPlan, listed: set[str]
) -> Outcome:
    doomed: dict[int, str] = {}
    for entry in changes.entries:
        if entry.operation != DELETE_FOLDER:
            continue
        folder_id, path = entry.payload.get("folder"), entry.payload.get("path")
        if isinstance(folder_id, int) and isinstance(path, str):
            doomed[folder_id] = path
    rows = {f.id: f for f in wanted.folders}
    for folder_id, path in doomed.items():
        row = rows.get(folder_id)
        if row is not None:
            path = row.path  # renamed since the destroy was queued
        if path.upper() == "INBOX" or (row is not None and row.special_use):
            raise CommandError(f"mailroom does not delete the system folder {path!r}.")
        if row is not None and row.label_id is not None:
            continue  # the folder belongs to another label now: leave it
        if path in listed:
            if conn.selected == path:
                conn.selected = None
            with conn.guard(f"deleting the folder {path!r}"):
                conn.client.delete_folder(path)

    def record(session: Session) -> None:
        if doomed:
            session.execute(delete(Folder).where(Folder.id.in_(doomed), Folder.label_id.is_(None)))

    return Outcome.done(changes, record)
