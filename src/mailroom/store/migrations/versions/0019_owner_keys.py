"""Owner data keys (envelope encryption) and the owner key rotations in progress.

``owner_keys`` holds one row per owner and key version: a random 32-byte data
key, wrapped (AES-256-GCM) by the installation's key wrapper — the master key
or an operator key file — with associated data naming the owner and the
version, so a wrapped key copied onto another owner or version does not open.
``wrapped_by`` names the wrapping key (a short id, never the key). Deleting an
owner deletes these rows first, in a transaction of its own: after that no
value encrypted under them can be read (crypto-shredding).

``key_rotations`` is an owner key rotation in progress: the old and the new
version and, per encrypted column, the last row already re-encrypted, so a
killed rotation continues where it stopped.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
STAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "owner_keys",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("wrapped", sa.LargeBinary(), nullable=False),
        sa.Column("wrapped_by", sa.Text(), nullable=False),
        sa.Column("created_at", STAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_owner_keys_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_owner_keys")),
        sa.UniqueConstraint("user_id", "version", name=op.f("uq_owner_keys_user_id_version")),
    )
    op.create_table(
        "key_rotations",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("from_version", sa.Integer(), nullable=False),
        sa.Column("to_version", sa.Integer(), nullable=False),
        sa.Column("progress", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("started_at", STAMP, nullable=False),
        sa.Column("finished_at", STAMP, nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_key_rotations_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_key_rotations")),
    )
    op.create_index(op.f("ix_key_rotations_user_id"), "key_rotations", ["user_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_key_rotations_user_id"), table_name="key_rotations")
    op.drop_table("key_rotations")
    op.drop_table("owner_keys")
