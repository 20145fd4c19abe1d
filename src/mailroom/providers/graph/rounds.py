"""Reading one folder's delta: one page (import) or the whole round (sync).

A folder's sync state (``Folder.state``) holds ``phase`` (``import`` until its
first enumeration ended, then ``sync``) and ``link``: the ``@odata.nextLink``
to go on with, or, once a round ended, the ``@odata.deltaLink`` for the next
one. Every page is taken in (:mod:`.intake`) in the same transaction that
stores the link it ends on, so an interrupted round resumes at its next page
and a page taken twice changes nothing. A link Graph no longer accepts (410,
``syncStateNotFound``) returns the folder to import: its link is dropped and
the next pages enumerate it again.
"""

from __future__ import annotations

from mailroom.providers.base import InvalidCursorError
from mailroom.providers.graph.api import GraphClient
from mailroom.providers.graph.folders import graph_id, set_state
from mailroom.providers.graph.intake import take_page
from mailroom.store.engine import Store
from mailroom.store.models import Folder

__all__ = ["PAGE_SIZE", "read_page", "read_round", "restart"]

PAGE_SIZE = 50


def _next_state(phase: str, next_link: str | None, delta_link: str | None) -> dict[str, object]:
    if delta_link is not None:
        return {"phase": "sync", "link": delta_link}
    return {"phase": phase, "link": next_link}


def restart(store: Store, folder_id: int) -> None:
    """Return a folder to import: its link is no longer accepted."""
    with store.session() as session:
        row = session.get(Folder, folder_id)
        if row is not None:
            set_state(row, phase="import", link=None)


def read_page(
    store: Store, client: GraphClient, account_id: int, user_id: int, folder: Folder
) -> None:
    """Take in the next page of a folder's enumeration (removals are kept)."""
    link = (folder.state or {}).get("link")
    try:
        page = next(client.delta(graph_id(folder), link, page_size=PAGE_SIZE))
    except InvalidCursorError:
        restart(store, folder.id)
        return
    state = _next_state("import", page.next_link, page.delta_link)
    take_page(store, client, account_id, user_id, folder.id, page, keep=True, state=state)


def read_round(
    store: Store,
    client: GraphClient,
    account_id: int,
    user_id: int,
    folder: Folder,
    *,
    keep: bool,
) -> bool:
    """Follow a synced folder's link to the end of the round; False if it went back to import."""
    link = (folder.state or {}).get("link")
    try:
        for page in client.delta(graph_id(folder), link, page_size=PAGE_SIZE):
            state = _next_state("sync", page.next_link, page.delta_link)
            take_page(store, client, account_id, user_id, folder.id, page, keep=keep, state=state)
    except InvalidCursorError:
        restart(store, folder.id)
        return False
    return True
