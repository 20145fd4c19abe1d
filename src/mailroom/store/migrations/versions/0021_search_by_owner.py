"""PostgreSQL's full-text index learns whose message each entry is.

``message_search`` (PostgreSQL) had only the message id and the document, so
a search for a word that is rare for one owner but common in the store
fetched every owner's matches from the GIN index and checked each against
``messages`` (on a 890,000-message store, 23,018 probes and half a second
for one owner's two-word query: bench/RESULTS.md, PostgreSQL at volume).
The entry now carries ``user_id`` and one GIN index covers ``(user_id,
document)`` — ``btree_gin`` lets an equality on the owner share a GIN index
with the text — so a query reads only that owner's posting lists.

``btree_gin`` ships with PostgreSQL and is a trusted extension (PostgreSQL
13+): the database's owner may create it. Where it cannot be created, the
column and an owner-first B-tree index are added instead and the text index
stays as it was (correct, without the gain); the upgrade says so in the log.

SQLite's FTS5 table is left alone: an embedded store serves one person, and
an FTS5 table cannot gain a column without being rebuilt.

The backfill copies the owner from ``messages`` (one pass over the table).

Revision ID: 0021
Revises: 0020
"""

from __future__ import annotations

import logging

from alembic import op
from sqlalchemy.exc import DBAPIError

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

log = logging.getLogger("alembic.runtime.migration")


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE message_search ADD COLUMN user_id BIGINT")
    op.execute(
        "UPDATE message_search SET user_id = messages.user_id FROM messages "
        "WHERE messages.id = message_search.message_id"
    )
    op.execute("ALTER TABLE message_search ALTER COLUMN user_id SET NOT NULL")
    try:
        with bind.begin_nested():
            bind.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS btree_gin")
    except DBAPIError as exc:
        log.warning(
            "The PostgreSQL extension btree_gin could not be created (%s); searches stay "
            "correct but read every owner's matches (docs/operations.md: PostgreSQL at volume).",
            str(exc.orig).strip().splitlines()[0] if exc.orig else exc,
        )
        op.execute("CREATE INDEX ix_message_search_user_id ON message_search (user_id)")
        return
    op.execute(
        "CREATE INDEX ix_message_search_user_id_document ON message_search "
        "USING gin (user_id, document)"
    )
    op.execute("DROP INDEX ix_message_search_document")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    op.execute(
        "CREATE INDEX IF NOT EXISTS ix_message_search_document ON message_search "
        "USING gin (document)"
    )
    op.execute("DROP INDEX IF EXISTS ix_message_search_user_id_document")
    op.execute("DROP INDEX IF EXISTS ix_message_search_user_id")
    op.execute("ALTER TABLE message_search DROP COLUMN user_id")
