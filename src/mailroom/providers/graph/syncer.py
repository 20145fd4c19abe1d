"""The Graph syncer: follow every synced folder's deltaLink, then judge what left (SPEC §2).

One :meth:`GraphSyncer.sync`:

1. reads the folder tree (:func:`.folders.refresh`): new folders start
   importing, renamed ones keep their rows, vanished ones lose their locations;
2. follows the deltaLink of each folder that finished its enumeration, page by
   page (:mod:`.rounds`); a link no longer accepted returns that folder to
   import (the importer enumerates it again);
3. if every folder answered — none is importing and no round failed — judges
   the removals kept while folders were importing and deletes the messages left
   with no location and no pending local change (gone from the mailbox).

``Retry-After`` and the four-requests-per-mailbox limit are the client's
(:mod:`.api`, :mod:`.limiter`); a RateLimitError that outlasts the client's
patience ends the sync for the job to reschedule.
"""

from __future__ import annotations

from mailroom.config import Settings
from mailroom.ingest.mirror import AccountScope, ChangeSet, delete_orphans, orphans
from mailroom.providers.graph.connection import open_client
from mailroom.providers.graph.folders import importing, refresh
from mailroom.providers.graph.importer import mark_import
from mailroom.providers.graph.intake import remove_gone
from mailroom.providers.graph.removals import take_removals
from mailroom.providers.graph.rounds import read_round
from mailroom.store.engine import Store

__all__ = ["GraphSyncer", "judge"]


def judge(store: Store, account_id: int) -> None:
    """Every folder answered: apply the kept removals and delete what is left nowhere."""
    with store.session() as session:
        scope = AccountScope.load(session, account_id)
        changes = ChangeSet()
        for folder_id, graph_ids in take_removals(session, account_id).items():
            remove_gone(session, scope, changes, folder_id, graph_ids)
        delete_orphans(session, scope, changes, orphans(session, account_id))
        changes.record(session, scope.user_id)


class GraphSyncer:
    """Syncs a Microsoft account: folder tree, then each folder's delta."""

    def __init__(self, store: Store, settings: Settings | None = None) -> None:
        self.store = store
        self.settings = settings

    def sync(self, account_id: int) -> list[int]:
        """Sync the account; returns the ids of the folders whose delta was read."""
        account = open_client(self.store, self.settings, account_id)
        touched: list[int] = []
        try:
            folders = refresh(self.store, account.client, account_id)
            answered = bool(folders)
            keep = any(importing(f) for f in folders)
            for folder in folders:
                if importing(folder):
                    continue
                if read_round(
                    self.store, account.client, account_id, account.user_id, folder, keep=keep
                ):
                    touched.append(folder.id)
                else:
                    answered = False
                    keep = True
        finally:
            account.client.close()
        if answered and not keep:
            judge(self.store, account_id)
        else:
            mark_import(self.store, account_id, finished=False)
        return touched
