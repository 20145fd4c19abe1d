"""messages.subject_key: an indexed key of the normalized subject for the subject rescue

Existing rows are filled in batches with the same function ingest uses
(``conversations.subject.subject_key``), so old and new mail compare alike.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

BATCH = 2000


def upgrade() -> None:
    from mailroom.conversations.subject import subject_key

    op.add_column("messages", sa.Column("subject_key", sa.String(40), nullable=True))
    op.create_index(
        "ix_messages_subject_key_received_at", "messages", ["subject_key", "received_at"]
    )
    connection = op.get_bind()
    last = 0
    while True:
        rows = connection.execute(
            sa.text("SELECT id, subject FROM messages WHERE id > :last ORDER BY id LIMIT :n"),
            {"last": last, "n": BATCH},
        ).all()
        if not rows:
            break
        keyed = [{"id": mid, "key": subject_key(subject or "")} for mid, subject in rows]
        connection.execute(
            sa.text("UPDATE messages SET subject_key = :key WHERE id = :id"),
            [row for row in keyed if row["key"] is not None] or [{"id": 0, "key": None}],
        )
        last = rows[-1][0]


def downgrade() -> None:
    op.drop_index("ix_messages_subject_key_received_at", table_name="messages")
    op.drop_column("messages", "subject_key")
