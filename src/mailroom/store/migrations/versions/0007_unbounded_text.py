"""Unbounded text: text from mail, providers and people is TEXT on both stores

PostgreSQL enforced ``VARCHAR(n)`` and SQLite did not, so a Subject over
1,000 characters or a From over 500 stopped an import on PostgreSQL only
(every re-run failed at the same message). The rule (see
the docstring of ``mailroom.store.models``): text that comes
from mail, a provider or a person is ``TEXT``; only values mailroom makes
itself (names from a closed set, hex digests) stay ``VARCHAR(n)``.

On PostgreSQL each column becomes ``TEXT`` (a catalogue change, no table
rewrite). On SQLite the declared type is left as it is: SQLite never
enforced the length, and ``VARCHAR(n)`` and ``TEXT`` have the same (TEXT)
affinity, so rebuilding every table (and its triggers) would change
nothing; ``env.py`` compares the two as equal there.

``ix_messages_from_email`` is dropped on both: every query on the sender
compares ``lower(from_email)`` or uses ``LIKE``, which this index never
served, and on PostgreSQL a btree entry over ~2.7 kB (a hostile From
address) would fail the insert.

Downgrading narrows the columns again, which PostgreSQL refuses while a
longer value is stored.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

# (table, column, the old width) of every column that becomes TEXT.
WIDENED = [
    ("users", "name", 200),
    ("users", "password_hash", 500),
    ("accounts", "name", 200),
    ("accounts", "status_reason", 500),
    ("api_tokens", "name", 200),
    ("skipped_messages", "provider_id", 500),
    ("threads", "subject", 1000),
    ("messages", "provider_id", 500),
    ("messages", "provider_thread_id", 500),
    ("messages", "message_id_header", 1000),
    ("messages", "from_name", 500),
    ("messages", "from_email", 500),
    ("messages", "preview", 300),
    ("messages", "list_id", 500),
    ("messages", "category_signal", 500),
    ("messages", "thread_note", 1000),
    ("message_refs", "ref", 1000),
    ("message_locations", "provider_ref", 1000),
    ("rules", "name", 200),
    ("contacts", "email", 500),
    ("outbox", "provider_id", 500),
    ("labels", "name", 500),
    ("labels", "path", 2000),
    ("label_bindings", "provider_ref", 1000),
    ("folders", "path", 1000),
    ("folders", "delimiter", 4),
]


def upgrade() -> None:
    op.drop_index("ix_messages_from_email", table_name="messages")
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, column, width in WIDENED:
        op.alter_column(table, column, type_=sa.Text(), existing_type=sa.String(width))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        for table, column, width in WIDENED:
            op.alter_column(table, column, type_=sa.String(width), existing_type=sa.Text())
    op.create_index("ix_messages_from_email", "messages", ["from_email"])
