"""The sealed word lists of owners whose mail is sealed (issue 19: prefix search).

The blind index keeps keyed hashes of whole words, so a search for the start
of a word cannot find sealed mail by itself. ``blind_vocabulary`` keeps each
sealing owner's words, sealed under their data key (``words``: the sorted,
newline-separated list, compressed and sealed, bound to the row); a search
opens it, finds the words that start with the last word of the query and
looks for their token words too (``crypto.blind_vocabulary``). Batches append
a row of their new words; rows are merged once an owner has many.
``word_count`` (clear) is the length of the row's list.

Revision ID: 0026
Revises: 0025
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
STAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "blind_vocabulary",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("words", sa.LargeBinary(), nullable=False),
        sa.Column("word_count", sa.Integer(), nullable=False),
        sa.Column("created_at", STAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_blind_vocabulary_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_blind_vocabulary")),
    )
    op.create_index(
        op.f("ix_blind_vocabulary_user_id"), "blind_vocabulary", ["user_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_blind_vocabulary_user_id"), table_name="blind_vocabulary")
    op.drop_table("blind_vocabulary")
