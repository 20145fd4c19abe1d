"""The local provider's registered services: the importer behind ``Account.provider == "local"``.

A local account is a file source (mbox, Maildir, a folder of .eml files) whose
path is in ``Account.settings["path"]``. It has no sync, no live push and nothing
to propagate (the no-op :class:`~mailroom.providers.local.propagator.LocalPropagator`):
one :meth:`LocalImporter.import_page` imports the whole source, idempotently
(the content hash is the provider id), and reports that no history is left.
``mailroom import PATH`` creates the account and calls the same import.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import func, select

from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.providers.base import ImportState
from mailroom.providers.local.importer import import_path
from mailroom.store.engine import Store
from mailroom.store.models import Account, Message, User

__all__ = ["LocalImporter"]


class LocalImporter:
    """The :class:`~mailroom.providers.base.Importer` of local accounts: one page, all of it."""

    def __init__(self, store: Store, settings: Settings | None = None) -> None:
        self.store = store

    def import_page(self, account_id: int) -> bool:
        """Import every message of the account's source; nothing is left afterwards."""
        with self.store.session() as session:
            row = session.execute(
                select(Account.name, Account.settings, User.name)
                .join(User, User.id == Account.user_id)
                .where(Account.id == account_id)
            ).one_or_none()
        if row is None:
            return False
        name, config, owner = row
        path = (config or {}).get("path")
        if not path:
            raise ConfigError(f"The local account {name!r} names no path to import from.")
        import_path(self.store, Path(path), owner=owner, account=name)
        return False

    def state(self, account_id: int) -> ImportState:
        """Local sources are imported in one call: never "importing"."""
        with self.store.session() as session:
            stored = session.scalar(
                select(func.count()).select_from(Message).where(Message.account_id == account_id)
            )
        return ImportState(importing=False, done=int(stored or 0), total=int(stored or 0))

    def close(self) -> None:
        """Nothing is held between pages."""
