"""Room for sealed mail (issue 19 items 2 and 3).

``blobs.user_id`` names the owner of a blob sealed under that owner's data
key (NULL: a clear blob, shared by content address as before). A sealed
blob's key is a per-owner keyed hash of the raw bytes, so two owners never
share one and deleting an owner can delete theirs. No foreign key: SQLite
cannot add one to an existing table without copying it, and owner deletion
removes an owner's blobs itself (``crypto/shredding.py``).

``message_bodies.sealed`` says the row's bodies, headers and attachment
list are sealed values; a clear row from before stays readable.

``search_tokens`` is the blind index: one row per owner, keyed token hash
(its first 8 bytes as a signed 64-bit integer) and message, for the messages
whose words may not go into the clear full-text index. On SQLite the table is
``WITHOUT ROWID`` (the primary key is the table): sealed ingest writes a
million rows for 6,000 messages, and one B-tree fewer per row counts.

Revision ID: 0020
Revises: 0019
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.add_column("blobs", sa.Column("user_id", ID, nullable=True))
    op.create_index("ix_blobs_user_id", "blobs", ["user_id"])
    op.add_column(
        "message_bodies",
        sa.Column("sealed", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.create_table(
        "search_tokens",
        sa.Column("user_id", ID, nullable=False),
        sa.Column("token", sa.BigInteger(), nullable=False),
        sa.Column("message_id", ID, nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_search_tokens_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["messages.id"],
            name=op.f("fk_search_tokens_message_id_messages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("user_id", "token", "message_id", name=op.f("pk_search_tokens")),
        sqlite_with_rowid=False,
    )
    op.create_index("ix_search_tokens_message_id", "search_tokens", ["message_id"])


def downgrade() -> None:
    op.drop_index("ix_search_tokens_message_id", table_name="search_tokens")
    op.drop_table("search_tokens")
    op.drop_column("message_bodies", "sealed")
    op.drop_index("ix_blobs_user_id", table_name="blobs")
    op.drop_column("blobs", "user_id")
