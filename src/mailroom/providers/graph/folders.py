"""Folder discovery: Graph's folder tree becomes ``Folder`` rows bound to the user's labels.

* Each Graph folder is one ``Folder`` row, found again by its Graph id (kept in
  ``Folder.state["graph_id"]``), so a folder renamed or moved elsewhere keeps its
  row, its sync marks and its locations; ``path`` is the display names from the
  top joined by ``/``.
* The well-known folders (``inbox``, ``sentitems``, ``drafts``, ``archive``,
  ``junkemail``, ``deleteditems``) bind to the user's system labels whatever
  they are called (the well-known name is kept in ``special_use``); every other
  folder resolves by its path through :mod:`mailroom.labels.resolver`, so the
  hierarchy becomes a label parent chain.
* A folder whose label was renamed, moved or destroyed in mailroom and not yet
  carried to Graph (``labels.lifecycle.held_folders``) keeps its label, so its
  old name does not come back as a new label.
* A folder gone from the tree loses its locations (its messages are judged when
  every folder has answered: they may live on elsewhere) and its row.
* Each label is bound (``LabelBinding``) to its folder's Graph id.

Import order (:func:`folder_rank`): Inbox, Sent, Drafts, user folders, Archive,
then Junk and Deleted Items.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.ingest.mirror import AccountScope, ChangeSet, remove_locations
from mailroom.labels.lifecycle import held_folders
from mailroom.labels.resolver import bind, resolve_path, system_label
from mailroom.providers.graph.api import GraphClient
from mailroom.providers.graph.models import GraphFolder
from mailroom.store.bulk import insert_or_get
from mailroom.store.engine import Store
from mailroom.store.models import Folder

__all__ = [
    "ROLES",
    "WELL_KNOWN",
    "discover",
    "folder_rank",
    "graph_folders",
    "graph_id",
    "importing",
    "refresh",
    "set_state",
]

# Graph's well-known folder names → the system role of their label
ROLES = {
    "inbox": "inbox",
    "sentitems": "sent",
    "drafts": "drafts",
    "archive": "archive",
    "junkemail": "spam",
    "deleteditems": "trash",
}
WELL_KNOWN = tuple(ROLES)
RANK = {"inbox": 0, "sentitems": 1, "drafts": 2, None: 3, "archive": 4, "junkemail": 5}
LAST_RANK = 6  # Deleted Items
FOLDERLESS_ROLES = frozenset({"snoozed", "starred"})


def graph_id(folder: Folder) -> str:
    """The Graph id of a folder row."""
    return str((folder.state or {}).get("graph_id", ""))


def folder_rank(folder: Folder) -> tuple[int, str]:
    """Sort key for import order: Inbox, Sent, Drafts, user folders, Archive, Junk, Deleted."""
    return RANK.get(folder.special_use, LAST_RANK), folder.path


def graph_folders(session: Session, account_id: int) -> list[Folder]:
    """The account's Graph folders, in import order."""
    rows = session.scalars(select(Folder).where(Folder.account_id == account_id))
    return sorted((f for f in rows if graph_id(f)), key=folder_rank)


def _label_for(session: Session, user_id: int, listed: GraphFolder, well_known: str | None) -> int:
    if well_known is not None:
        return system_label(session, user_id, ROLES[well_known]).id
    label = resolve_path(session, user_id, list(listed.path))
    if label.role in FOLDERLESS_ROLES:  # Starred/Snoozed never live in a folder
        label = resolve_path(session, user_id, [*listed.path[:-1], f"{listed.path[-1]} (Graph)"])
    return label.id


def discover(
    session: Session,
    scope: AccountScope,
    changes: ChangeSet,
    listed: Sequence[GraphFolder],
    well_known: dict[str, str],
) -> list[Folder]:
    """Bring the account's folder rows, labels and bindings in line with Graph's tree."""
    role_of = {folder_id: name for name, folder_id in well_known.items()}
    rows = {
        graph_id(f): f
        for f in session.scalars(select(Folder).where(Folder.account_id == scope.account_id))
        if graph_id(f)
    }
    held = held_folders(session, scope.account_id)
    seen: set[str] = set()
    for item in listed:
        if item.hidden:
            continue
        seen.add(item.id)
        path = "/".join(item.path)
        row = rows.get(item.id)
        if row is None:
            # insert-or-get: two first syncs may discover the folder at the same time
            folder_id, _created = insert_or_get(
                session,
                Folder,
                {
                    "account_id": scope.account_id,
                    "path": path,
                    "delimiter": "/",
                    "special_use": role_of.get(item.id),
                    "state": {"graph_id": item.id},
                },
                ("account_id", "path"),
            )
            row = session.get(Folder, folder_id)
            assert row is not None
            if graph_id(row) != item.id:
                set_state(row, graph_id=item.id, phase="import", link=None)
            rows[item.id] = row
        else:
            row.path = path
            row.special_use = role_of.get(item.id)
        session.flush()
        if row.id not in held:
            label = _label_for(session, scope.user_id, item, role_of.get(item.id))
            if row.label_id != label:
                row.label_id = label
                scope.folder_labels[row.id] = label
                changes.mailboxes.add(label)
        if row.label_id is not None:
            bind(session, row.label_id, scope.account_id, item.id)
    for gone_id, row in list(rows.items()):
        if gone_id not in seen:
            remove_locations(session, scope, changes, row.id)
            scope.folder_labels.pop(row.id, None)
            session.delete(row)
            del rows[gone_id]
    session.flush()
    return sorted(rows.values(), key=folder_rank)


def set_state(folder: Folder, **values: Any) -> None:
    """Replace some keys of a folder's sync state (a new dict, so the ORM sees the change)."""
    folder.state = {**(folder.state or {}), **values}


def importing(folder: Folder) -> bool:
    """Whether the folder has not finished its first (or a renewed) enumeration."""
    return (folder.state or {}).get("phase") != "sync"


def refresh(store: Store, client: GraphClient, account_id: int) -> list[Folder]:
    """Read Graph's folder tree (two requests) and bring the store in line; in import order."""
    well_known = client.well_known_folders(WELL_KNOWN)
    listed = client.folders()
    with store.session() as session:
        scope = AccountScope.load(session, account_id)
        changes = ChangeSet()
        rows = discover(session, scope, changes, listed, well_known)
        changes.record(session, scope.user_id)
        session.expunge_all()
        return rows
