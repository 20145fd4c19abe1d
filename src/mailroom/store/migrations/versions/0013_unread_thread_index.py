"""Index the user's unread threads

A partial index ``threads (user_id) WHERE unread_count > 0``: the sidebar's and the
tabs bar's unread counts (``listing.label_tree``, ``listing.tab_unread``) read only
the user's unread threads instead of every thread row of the user. Indexes only.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

UNREAD = "unread_count > 0"


def upgrade() -> None:
    op.create_index(
        "ix_threads_user_id_unread",
        "threads",
        ["user_id"],
        postgresql_where=sa.text(UNREAD),
        sqlite_where=sa.text(UNREAD),
    )


def downgrade() -> None:
    op.drop_index("ix_threads_user_id_unread", table_name="threads")
