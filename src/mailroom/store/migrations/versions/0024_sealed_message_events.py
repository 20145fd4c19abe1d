"""Message events say whether their summary, location and source are sealed (issue 19).

``message_events.sealed`` is true when the row's ``summary``, ``location`` and
``source`` are values sealed under the owner's data key
(``events.sealed_events``): the event a mail describes (a flight, a hotel, a
concert) is the mail's content. Rows written before, or while sealing is
off, stay clear and readable.

Adding a column with a constant default rewrites no rows on either store.

Revision ID: 0024
Revises: 0023
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "message_events",
        sa.Column("sealed", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    op.drop_column("message_events", "sealed")
