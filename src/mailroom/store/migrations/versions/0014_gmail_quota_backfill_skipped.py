"""Gmail: the backfill state, the learned quota and its usage, last sight of a skipped message

``gmail_backfills`` holds each Gmail account's resumable backfill (phase,
page token, attempts, when it may go on); ``gmail_quota_limits`` what the
quota pacer learned about an account; ``gmail_quota_usage`` the units spent
per account and second (the embedded mode's sliding minute).
``skipped_messages.last_seen_at`` says when a message that could not be
stored was last seen (``created_at`` is the first time); existing rows get
their ``created_at``.

Page tokens and error sentences come from Google and are ``TEXT``; only
the phase, a name from a closed set, is ``VARCHAR``.

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
STAMP = sa.DateTime(timezone=True)


def _account_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["account_id"],
        ["accounts.id"],
        name=op.f(f"fk_{table}_account_id_accounts"),
        ondelete="CASCADE",
    )


def upgrade() -> None:
    op.create_table(
        "gmail_backfills",
        sa.Column("account_id", ID, nullable=False),
        sa.Column("phase", sa.String(10), nullable=False),
        sa.Column("page_token", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("not_before", STAMP, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("finished_at", STAMP, nullable=True),
        sa.Column("updated_at", STAMP, nullable=False),
        _account_fk("gmail_backfills"),
        sa.PrimaryKeyConstraint("account_id", name=op.f("pk_gmail_backfills")),
    )
    op.create_index(
        "ix_gmail_backfills_phase_not_before", "gmail_backfills", ["phase", "not_before"]
    )

    op.create_table(
        "gmail_quota_limits",
        sa.Column("account_id", ID, nullable=False),
        sa.Column("learned_limit", sa.Integer(), nullable=True),
        sa.Column("learned_at", STAMP, nullable=True),
        sa.Column("slowdowns", sa.Integer(), nullable=False),
        sa.Column("last_rejected_at", STAMP, nullable=True),
        sa.Column("blocked_until", STAMP, nullable=True),
        _account_fk("gmail_quota_limits"),
        sa.PrimaryKeyConstraint("account_id", name=op.f("pk_gmail_quota_limits")),
    )

    op.create_table(
        "gmail_quota_usage",
        sa.Column("account_id", ID, nullable=False),
        sa.Column("second", sa.BigInteger(), nullable=False),
        sa.Column("units", sa.Integer(), nullable=False),
        _account_fk("gmail_quota_usage"),
        sa.PrimaryKeyConstraint("account_id", "second", name=op.f("pk_gmail_quota_usage")),
    )

    # Nullable first so existing rows can be filled, then NOT NULL (a table
    # rebuild on SQLite; skipped_messages has no triggers and nothing refers to it).
    op.add_column("skipped_messages", sa.Column("last_seen_at", STAMP, nullable=True))
    op.execute("UPDATE skipped_messages SET last_seen_at = created_at")
    with op.batch_alter_table("skipped_messages") as batch:
        batch.alter_column("last_seen_at", existing_type=STAMP, nullable=False)


def downgrade() -> None:
    with op.batch_alter_table("skipped_messages") as batch:
        batch.drop_column("last_seen_at")
    op.drop_table("gmail_quota_usage")
    op.drop_table("gmail_quota_limits")
    op.drop_index("ix_gmail_backfills_phase_not_before", table_name="gmail_backfills")
    op.drop_table("gmail_backfills")
