"""The store: one database (SQLite or PostgreSQL) holding all of mailroom's mail.

``Store`` and ``open_store`` are imported on first use, so that the modules of
the store a read command needs (``store.reader``) do not pull in SQLAlchemy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mailroom.store.engine import Store, open_store

__all__ = ["Store", "open_store"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'mailroom.store' has no attribute {name!r}")
    from mailroom.store import engine

    return getattr(engine, name)
