"""The assistant: held and released times, the verdict and the catch-up's progress mark

``messages.category_held_at`` is set when new mail is held for the
assistant's verdict (no tab until released) and ``category_released_at``
when the hold ends, by whichever releaser comes first; their difference is
the hold time the admin sees. ``assistant_category`` and
``assistant_reason`` are the verdict (a cascade stage, so a recomputation
keeps it); ``assistant_at`` says when the assistant was asked and answered
(or gave no verdict) — the catch-up's progress mark: a message is asked once.

The partial index lets the once-a-minute sweep find held mail without
walking every message. The reason is model text and is ``TEXT``; the
category is a tab name mailroom makes and stays ``VARCHAR(20)`` like
``messages.category``.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

STAMP = sa.DateTime(timezone=True)
_HELD = "category_held_at IS NOT NULL AND category_released_at IS NULL"


def upgrade() -> None:
    op.add_column("messages", sa.Column("category_held_at", STAMP, nullable=True))
    op.add_column("messages", sa.Column("category_released_at", STAMP, nullable=True))
    op.add_column("messages", sa.Column("assistant_category", sa.String(20), nullable=True))
    op.add_column("messages", sa.Column("assistant_reason", sa.Text(), nullable=True))
    op.add_column("messages", sa.Column("assistant_at", STAMP, nullable=True))
    op.create_index(
        "ix_messages_held",
        "messages",
        ["category_held_at"],
        postgresql_where=sa.text(_HELD),
        sqlite_where=sa.text(_HELD),
    )


def downgrade() -> None:
    op.drop_index("ix_messages_held", table_name="messages")
    for column in (
        "assistant_at",
        "assistant_reason",
        "assistant_category",
        "category_released_at",
        "category_held_at",
    ):
        op.drop_column("messages", column)
