"""Messages say whether their mail columns are sealed (issue 19 item 2, second half).

``messages.sealed`` is true when the row's subject, preview, sender name and
address, recipients, list id, category signal and assistant reason are
values sealed under the owner's data key (``crypto.message_fields``), and
its Message-ID, references and subject key are the owner's keyed lookup
hashes instead of the clear id and a plain SHA-1. Rows written before, or
while sealing is off, stay clear and readable.

Adding a column with a constant default rewrites no rows on either store.

Revision ID: 0022
Revises: 0021
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "messages",
        sa.Column("sealed", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    # ALTER TABLE DROP COLUMN on both (SQLite 3.35+): a batch copy of ``messages`` would
    # break the triggers of other tables that name it.
    op.drop_column("messages", "sealed")
