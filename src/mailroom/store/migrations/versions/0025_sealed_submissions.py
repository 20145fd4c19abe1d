"""Submissions say whether their addresses, Message-ID and replies are sealed (issue 19).

``submissions.sealed`` is true when the row's ``message_id``, ``envelope``,
``delivery_status`` and ``last_error`` are values sealed under the owner's
data key and its ``message_key`` is the owner's keyed hash of the Message-ID
(``outbound.sealed_queue``): who an owner writes to is as private as what
they receive. The submission's ``failed_sends.reason`` and
``bounces.recipients`` are sealed exactly when it is, so those tables need no
column of their own. Rows written before, or while sealing is off, stay
clear and readable.

Adding a column with a constant default rewrites no rows on either store.

Revision ID: 0025
Revises: 0024
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "submissions",
        sa.Column("sealed", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    op.drop_column("submissions", "sealed")
