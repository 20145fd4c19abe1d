"""The Graph importer: a folder's first enumeration, one page of 50 per call (SPEC §1–2).

Folders are enumerated one after the other in rank order (Inbox, Sent, Drafts,
user folders, Archive, then Junk and Deleted Items; :func:`.folders.folder_rank`),
each newest first, as Graph's delta enumerates. A page ends with a nextLink
(more of this folder) or a deltaLink (this folder is done: from now on the
syncer follows it). Removals seen meanwhile are kept on the account
(:mod:`.removals`). When no folder is left to enumerate,
``Account.import_finished_at`` is set (the read path's "still importing");
while one is, it is null.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import func, select, update

from mailroom.config import Settings
from mailroom.providers.base import ImportState
from mailroom.providers.graph.connection import open_client
from mailroom.providers.graph.folders import graph_folders, importing, refresh
from mailroom.providers.graph.rounds import read_page
from mailroom.store.engine import Store
from mailroom.store.models import Account, Message

__all__ = ["GraphImporter", "mark_import"]


def mark_import(store: Store, account_id: int, finished: bool) -> None:
    """Keep ``Account.import_finished_at`` in step with the folders' phases."""
    with store.session() as session:
        account = session.get(Account, account_id)
        if account is None:
            return
        if finished and account.import_finished_at is None:
            account.import_finished_at = datetime.now(UTC)
        elif not finished and account.import_finished_at is not None:
            session.execute(
                update(Account).where(Account.id == account_id).values(import_finished_at=None)
            )


class GraphImporter:
    """Imports a Microsoft account's folders, one delta page per call."""

    def __init__(self, store: Store, settings: Settings | None = None) -> None:
        self.store = store
        self.settings = settings

    def import_page(self, account_id: int, folder_id: int | None = None) -> bool:
        """Take in the next page of the first folder still importing; True while any is left.

        ``folder_id``: the next page of that folder instead (nothing if it is done),
        so several workers can import independent folders side by side.
        """
        account = open_client(self.store, self.settings, account_id)
        try:
            with self.store.session() as session:
                folders = graph_folders(session, account_id)
                session.expunge_all()
            if not folders:
                folders = refresh(self.store, account.client, account_id)
            left = [f for f in folders if importing(f) and folder_id in (None, f.id)]
            if left:
                read_page(self.store, account.client, account_id, account.user_id, left[0])
            with self.store.session() as session:
                more = any(importing(f) for f in graph_folders(session, account_id))
        finally:
            account.client.close()
        mark_import(self.store, account_id, finished=not more)
        return more

    def state(self, account_id: int) -> ImportState:
        """Whether the account is still importing, with the messages stored so far."""
        with self.store.session() as session:
            finished = session.scalar(
                select(Account.import_finished_at).where(Account.id == account_id)
            )
            done = int(
                session.scalar(
                    select(func.count())
                    .select_from(Message)
                    .where(Message.account_id == account_id)
                )
                or 0
            )
        return ImportState(
            importing=finished is None,
            done=done,
            total=done if finished is not None else 0,
            finished_at=finished,
        )

    def close(self) -> None:
        """Nothing is held between pages (a client is opened per page)."""
