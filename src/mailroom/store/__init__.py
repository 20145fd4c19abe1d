"""The store: one database (SQLite or PostgreSQL) holding all of mailroom's mail."""

from mailroom.store.engine import Store, open_store

__all__ = ["Store", "open_store"]
