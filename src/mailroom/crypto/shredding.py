"""Deleting an owner: their data key first, then every row that is theirs.

1. The owner's ``owner_keys`` rows are deleted in a transaction of their own,
   committed before anything else: from then on nothing encrypted under them
   can be read, in this database, its WAL, its free pages or any backup.
2. One transaction deletes every row linked to the owner, table by table in
   :data:`OWNED_TABLES` (children before parents; a test walks the schema and
   fails on a table with a user or account link missing here), the search
   entries (clear words or the blind index's token words), the raw-message
   blobs no other owner's row still names, and the owner's sealed blobs (``blobs.user_id``).
3. On SQLite the deletion runs with ``PRAGMA secure_delete=ON`` (freed bytes
   are overwritten with zeros, not just marked free), the full-text index is
   merged (``optimize``: a deleted document's terms otherwise linger in older
   index segments), and the WAL is checkpointed and truncated, so the old
   pages leave the log file. On PostgreSQL deleted tuples stay in the table
   files until VACUUM marks their space reusable — and even then the bytes
   stay until overwritten; docs/operations.md says what to run.

A deletion killed half-way is finished by running it again: the key is gone
already, and every step deletes what is left.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import Connection, text
from sqlalchemy.orm import Session

from mailroom.audit import record
from mailroom.crypto.owner_secrets import forget_owner
from mailroom.reading import user_id
from mailroom.store.engine import Store

_MESSAGES = "SELECT id FROM messages WHERE user_id = :owner"
_ACCOUNTS = "SELECT id FROM accounts WHERE user_id = :owner"
_SUBMISSIONS = "SELECT id FROM submissions WHERE user_id = :owner"
_ENDPOINTS = "SELECT id FROM webhook_endpoints WHERE user_id = :owner"
_THREADS = "SELECT id FROM threads WHERE user_id = :owner"
_OWN = "user_id = :owner"

# (table, rows of the owner) in deletion order: a row goes before the rows it names.
OWNED_TABLES: tuple[tuple[str, str], ...] = (
    ("owner_keys", _OWN),  # gone already (step 1); here so a rerun finds nothing left
    ("key_rotations", _OWN),
    ("bounces", f"message_id IN ({_MESSAGES}) OR submission_id IN ({_SUBMISSIONS})"),
    ("failed_sends", f"submission_id IN ({_SUBMISSIONS})"),
    ("submissions", _OWN),
    ("pending_changes", f"account_id IN ({_ACCOUNTS})"),
    ("message_events", _OWN),
    ("message_bodies", f"message_id IN ({_MESSAGES})"),
    ("message_keywords", f"message_id IN ({_MESSAGES})"),
    ("message_labels", f"message_id IN ({_MESSAGES})"),
    ("message_locations", f"message_id IN ({_MESSAGES})"),
    ("message_refs", f"message_id IN ({_MESSAGES})"),
    ("messages", _OWN),
    ("thread_labels", f"thread_id IN ({_THREADS})"),
    ("threads", _OWN),
    ("label_bindings", f"account_id IN ({_ACCOUNTS})"),
    ("folders", f"account_id IN ({_ACCOUNTS})"),
    ("identities", _OWN),
    ("gmail_backfills", f"account_id IN ({_ACCOUNTS})"),
    ("gmail_quota_limits", f"account_id IN ({_ACCOUNTS})"),
    ("gmail_quota_usage", f"account_id IN ({_ACCOUNTS})"),
    ("skipped_messages", f"account_id IN ({_ACCOUNTS})"),
    ("sync_state", f"account_id IN ({_ACCOUNTS})"),
    ("account_events", _OWN),
    ("webhook_deliveries", f"endpoint_id IN ({_ENDPOINTS})"),
    ("webhook_cursors", f"endpoint_id IN ({_ENDPOINTS})"),
    ("webhook_endpoints", _OWN),
    ("accounts", _OWN),
    ("labels", _OWN),  # its delete trigger writes Mailbox changes: `changes` comes after
    ("api_tokens", _OWN),
    ("web_sessions", _OWN),
    ("calendar_feeds", _OWN),
    ("change_floors", _OWN),
    ("contacts", _OWN),
    ("blind_vocabulary", _OWN),
    ("jmap_uploads", _OWN),
    ("push_subscriptions", _OWN),
    ("rules", _OWN),
    ("vacation_replies", _OWN),
    ("vacation_responses", _OWN),
    ("changes", _OWN),
    ("users", "id = :owner"),
)

# Where raw bytes are named: a blob goes when none of these names it any more.
_BLOB_NAMES = (
    ("messages", "raw_sha256"),
    ("jmap_uploads", "sha256"),
    ("submissions", "raw_sha256"),
)


@dataclass
class Deletion:
    """What deleting one owner removed: rows per table, blobs, and the SQLite clean-up."""

    owner: int
    rows: dict[str, int] = field(default_factory=dict)
    blobs: int = 0
    wal_truncated: bool | None = None  # None on PostgreSQL

    @property
    def messages(self) -> int:
        """How many messages went."""
        return self.rows.get("messages", 0)


def owner_id(store: Store, name: str) -> int:
    """The id of user ``name``; a NotFoundError in one sentence."""
    with store.session() as session:
        return user_id(session, name)


def destroy_keys(store: Store, owner: int) -> int:
    """Delete every data key version of ``owner`` and commit; how many there were."""
    with store.engine.connect() as conn, conn.begin():
        return _count(conn.execute(text("DELETE FROM owner_keys WHERE user_id = :o"), {"o": owner}))


def delete_owner(store: Store, name: str) -> Deletion:
    """Delete user ``name`` and all that is theirs: the key first, then the rows (module doc)."""
    owner = owner_id(store, name)
    destroy_keys(store, owner)
    # The owner's secret outside the database (if kept): without it, no backup opens their key.
    forget_owner(store.sealing.wrapper if store.sealing is not None else None, owner)
    deletion = Deletion(owner)
    sqlite = store.dialect == "sqlite"
    with store.engine.connect() as conn:
        if sqlite:
            before = conn.exec_driver_sql("PRAGMA secure_delete").scalar()
            conn.exec_driver_sql("PRAGMA secure_delete=ON")
            conn.commit()  # SQLAlchemy began a (logical) transaction for the PRAGMAs
        try:
            with Session(bind=conn) as session:
                _delete_rows(session, owner, deletion, sqlite)
                record(
                    session,
                    "user.delete",
                    user_name=name,
                    user_id=owner,
                    detail=f"data key destroyed; {deletion.messages} messages, "
                    f"{sum(deletion.rows.values())} rows, {deletion.blobs} blobs deleted",
                )
                session.commit()
            if sqlite:
                deletion.wal_truncated = _scrub_sqlite(conn)
        finally:
            if sqlite:
                conn.rollback()
                conn.exec_driver_sql(f"PRAGMA secure_delete={int(before or 0)}")
                conn.commit()
    return deletion


def _delete_rows(session: Session, owner: int, deletion: Deletion, sqlite: bool) -> None:
    params = {"owner": owner}
    blobs = {
        row[0]
        for table, column in _BLOB_NAMES
        for row in session.execute(
            text(f"SELECT {column} FROM {table} WHERE user_id = :owner AND {column} IS NOT NULL"),
            params,
        )
    }
    search_key = "rowid" if sqlite else "message_id"
    session.execute(text(f"DELETE FROM message_search WHERE {search_key} IN ({_MESSAGES})"), params)
    for table, where in OWNED_TABLES:
        deletion.rows[table] = _count(
            session.execute(text(f"DELETE FROM {table} WHERE {where}"), params)
        )
    for sha in sorted(blobs):
        named = " OR ".join(
            f"EXISTS (SELECT 1 FROM {table} WHERE {column} = :sha)" for table, column in _BLOB_NAMES
        )
        gone = session.execute(
            text(f"DELETE FROM blobs WHERE sha256 = :sha AND NOT ({named})"), {"sha": sha}
        )
        deletion.blobs += _count(gone)
    # The owner's sealed blobs (crypto.mail_writing): keyed by their hash, named by nobody else.
    sealed = session.execute(text("DELETE FROM blobs WHERE user_id = :owner"), params)
    deletion.blobs += _count(sealed)


def _scrub_sqlite(conn: Connection) -> bool:
    """Merge the search index and truncate the WAL; False when a reader kept the WAL in use."""
    with conn.begin():
        # The merge rewrites the index without the deleted documents' terms.
        conn.exec_driver_sql("INSERT INTO message_search(message_search) VALUES('optimize')")
    busy, _log, _done = conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()
    conn.commit()
    return not busy


def _count(result: object) -> int:
    return int(getattr(result, "rowcount", 0) or 0)
