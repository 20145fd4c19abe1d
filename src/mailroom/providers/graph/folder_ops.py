"""Label changes carried to Graph folders: create, rename or move, delete (idempotent).

What a label's folder should be is derived from the label as it is now, so a
replay changes nothing:

* **create** — a label with no folder of the account gets one, named by the
  label, under the folder of its parent label (or at the top); a folder of that
  name already there (an earlier try) is taken instead of a second one;
* **rename / move** — the folder bound to the label is renamed to the label's
  name (``PATCH displayName``) and moved under its parent label's folder
  (``POST mailFolders/{id}/move``) when either differs;
* **delete** — the folder named in the change is deleted; one Graph no longer
  has counts as deleted.

The folder rows are recorded in the transaction that marks the change done
(``Outcome.record``), so the next sync finds the same label, never a second
one; paths of descendants follow at the next folder refresh (rows are found by
Graph id).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.ingest.mirror import AccountScope, ChangeSet, remove_locations
from mailroom.labels.resolver import bind
from mailroom.providers.base import CREATE_FOLDER, DELETE_FOLDER, MessageChanges, Outcome
from mailroom.providers.graph.connection import GraphAccount
from mailroom.providers.graph.errors import FolderExistsError, NotFoundError
from mailroom.providers.graph.folders import graph_id, set_state
from mailroom.providers.graph.models import GraphFolder
from mailroom.store.engine import Store
from mailroom.store.models import Folder, Label

__all__ = ["propagate_folder_change"]

Recorder = Callable[[Session], None]


@dataclass(frozen=True, slots=True)
class _Wanted:
    """The label as it is now, and its folder (and its parent's) at Graph."""

    label_id: int
    name: str | None  # None: the label is gone
    folder: tuple[int, str, str] | None  # (row id, Graph id, path) of its folder
    parent_graph_id: str | None  # the parent label's folder (None: top level)
    parent_path: str


def _wanted(store: Store, account_id: int, label_id: int) -> _Wanted:
    with store.session() as session:
        label = session.get(Label, label_id)
        rows = [
            f
            for f in session.scalars(select(Folder).where(Folder.account_id == account_id))
            if graph_id(f)
        ]
        mine = next((f for f in rows if f.label_id == label_id), None)
        parent = (
            next((f for f in rows if f.label_id == label.parent_id), None)
            if label is not None and label.parent_id is not None
            else None
        )
        return _Wanted(
            label_id,
            label.name if label is not None else None,
            (mine.id, graph_id(mine), mine.path) if mine is not None else None,
            graph_id(parent) if parent is not None else None,
            parent.path if parent is not None else "",
        )


def _joined(parent_path: str, name: str) -> str:
    return f"{parent_path}/{name}" if parent_path else name


def _record_folder(
    account_id: int, label_id: int, folder: GraphFolder, path: str, row_id: int | None
) -> Recorder:
    def record(session: Session) -> None:
        row = session.get(Folder, row_id) if row_id is not None else None
        if row is None:
            row = session.scalar(
                select(Folder).where(Folder.account_id == account_id, Folder.path == path)
            )
        if row is None:
            row = Folder(account_id=account_id, path=path, delimiter="/", state={})
            session.add(row)
        row.path = path
        row.label_id = label_id
        set_state(row, graph_id=folder.id)
        session.flush()
        bind(session, label_id, account_id, folder.id)

    return record


def _existing_child(account: GraphAccount, parent_id: str | None, name: str) -> GraphFolder:
    for folder in account.client.folders():
        if folder.name == name and (parent_id is None or folder.parent_id == parent_id):
            return folder
    raise NotFoundError("The folder mailroom created is not at Microsoft's mail service.")


def _create(account: GraphAccount, wanted: _Wanted) -> Recorder:
    if wanted.folder is not None or wanted.name is None:
        return lambda session: None  # already there, or the label is gone: nothing to do
    try:
        folder = account.client.create_folder(wanted.name, wanted.parent_graph_id)
    except FolderExistsError:
        folder = _existing_child(account, wanted.parent_graph_id, wanted.name)
    path = _joined(wanted.parent_path, wanted.name)
    return _record_folder(account.account_id, wanted.label_id, folder, path, None)


def _rename(account: GraphAccount, wanted: _Wanted) -> Recorder:
    if wanted.name is None:
        return lambda session: None
    if wanted.folder is None:
        return _create(account, wanted)
    row_id, folder_id, path = wanted.folder
    target = _joined(wanted.parent_path, wanted.name)
    if path == target:
        return lambda session: None
    current_parent, _, current_name = path.rpartition("/")
    folder: GraphFolder | None = None
    if current_name != wanted.name:
        folder = account.client.rename_folder(folder_id, wanted.name)
    if current_parent != wanted.parent_path:
        # the top level is the root's children: msgfolderroot names it
        destination = wanted.parent_graph_id or "msgfolderroot"
        folder = account.client.move_folder(folder_id, destination)
    assert folder is not None  # the path differs, so one of the two ran
    return _record_folder(account.account_id, wanted.label_id, folder, target, row_id)


def _delete(account: GraphAccount, changes: MessageChanges) -> Recorder:
    rows = [
        int(e.payload["folder"])
        for e in changes.entries
        if e.operation == DELETE_FOLDER and isinstance(e.payload.get("folder"), int)
    ]

    def record(session: Session) -> None:
        scope = AccountScope.load(session, account.account_id)
        change_set = ChangeSet()
        for row_id in rows:
            row = session.get(Folder, row_id)
            if row is None:
                continue
            remove_locations(session, scope, change_set, row.id)
            session.delete(row)
        change_set.record(session, scope.user_id)

    return record


def propagate_folder_change(
    store: Store, account: GraphAccount, changes: MessageChanges
) -> Outcome:
    """Carry one label's folder changes (module docstring); idempotent."""
    label_id = changes.folder_label
    assert label_id is not None
    operations = {e.operation for e in changes.entries}
    if DELETE_FOLDER in operations:
        with store.session() as session:
            graph_ids = [
                graph_id(row)
                for e in changes.entries
                if e.operation == DELETE_FOLDER
                and isinstance(e.payload.get("folder"), int)
                and (row := session.get(Folder, int(e.payload["folder"]))) is not None
            ]
        for folder_id in graph_ids:
            with contextlib.suppress(NotFoundError):  # gone already: what was wanted
                account.client.delete_folder(folder_id)
        return Outcome.done(changes, _delete(account, changes))
    wanted = _wanted(store, account.account_id, label_id)
    step = _create(account, wanted) if operations == {CREATE_FOLDER} else _rename(account, wanted)
    return Outcome.done(changes, step)
