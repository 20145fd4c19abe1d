"""The propagator of local accounts: there is no provider, so every change is done at once.

That includes folder changes (a label created, renamed or destroyed,
:data:`~mailroom.providers.base.FOLDER_OPERATIONS`): a local source (mbox,
Maildir, a folder of .eml files) is only read, so a label's folder is never
written into its files; the label lives in the database alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from mailroom.config import Settings
from mailroom.providers.base import MessageChanges, Outcome
from mailroom.store.engine import Store

PROVIDER = "local"


class LocalPropagator:
    """The no-op :class:`~mailroom.providers.base.Propagator`: nothing to carry anywhere.

    Also the fallback for accounts whose provider registered no propagator.
    """

    def __init__(self, store: Store | None = None, settings: Settings | None = None) -> None:
        self.store = store

    def propagate(self, account_id: int, batch: Sequence[MessageChanges]) -> Iterator[Outcome]:
        """Every change is done: the database is the only copy."""
        for changes in batch:
            yield Outcome.done(changes)
