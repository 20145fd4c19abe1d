"""The propagation table ``outbox`` becomes ``pending_changes``

The table holds label changes waiting to be carried to the provider; "outbox"
is kept for outgoing mail. Rows, ids and states are unchanged. Its indexes
follow the name on both stores; on PostgreSQL the primary key, the foreign
keys and the id sequence follow too. On SQLite constraint names live inside
the table's own definition, where nothing refers to them, and renaming them
would need a table rebuild for no gain, so they keep the old name there.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

INDEXES = (("message_id",), ("state", "next_attempt_at"))
# PostgreSQL only: named by the naming convention in 0002.
CONSTRAINTS = ("pk_{}", "fk_{}_account_id_accounts", "fk_{}_message_id_messages")


def _rename(old: str, new: str) -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute(f"ALTER TABLE {old} RENAME TO {new}")
        # SQLite cannot rename an index: drop it and build it again under the new name.
        for columns in INDEXES:
            suffix = "_".join(columns)
            op.drop_index(f"ix_{old}_{suffix}", table_name=new)
            op.create_index(f"ix_{new}_{suffix}", new, list(columns))
        return
    op.execute(f"ALTER TABLE {old} RENAME TO {new}")
    for columns in INDEXES:
        suffix = "_".join(columns)
        op.execute(f"ALTER INDEX ix_{old}_{suffix} RENAME TO ix_{new}_{suffix}")
    for pattern in CONSTRAINTS:
        op.execute(
            f"ALTER TABLE {new} RENAME CONSTRAINT {pattern.format(old)} TO {pattern.format(new)}"
        )
    op.execute(f"ALTER SEQUENCE IF EXISTS {old}_id_seq RENAME TO {new}_id_seq")


def upgrade() -> None:
    _rename("outbox", "pending_changes")


def downgrade() -> None:
    _rename("pending_changes", "outbox")
