"""Outgoing mail: submissions, failed sends, lane buckets, vacation replies, bounces

``submissions`` holds every message queued for sending, unique per (account,
Message-ID key) so a message queued twice is one submission; ``failed_sends``
the ones that gave up; ``send_rate_buckets`` each lane's shared token bucket
in the embedded mode; ``vacation_replies`` whom the vacation response already
answered; ``bounces`` the delivery status notifications that report on a
submission. ``accounts.smtp_secret`` is the outgoing server's sealed password.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
STAMP = sa.DateTime(timezone=True)


def _fk(table: str, column: str, target: str, ondelete: str | None) -> sa.ForeignKeyConstraint:
    referred, _, key = target.partition(".")
    return sa.ForeignKeyConstraint(
        [column], [target], name=op.f(f"fk_{table}_{column}_{referred}"), ondelete=ondelete
    )


def upgrade() -> None:
    # Plain ALTER TABLE on both stores (no batch rebuild of a table with triggers).
    op.add_column("accounts", sa.Column("smtp_secret", sa.LargeBinary(), nullable=True))

    op.create_table(
        "submissions",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("account_id", ID, nullable=False),
        sa.Column("identity_id", ID, nullable=True),
        sa.Column("email_id", ID, nullable=True),
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.Column("message_key", sa.Text(), nullable=False),
        sa.Column("raw_sha256", sa.String(64), nullable=False),
        sa.Column("envelope", sa.JSON(), nullable=False),
        sa.Column("lane", sa.String(10), nullable=False),
        sa.Column("kind", sa.Text(), nullable=True),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("queued_at", STAMP, nullable=False),
        sa.Column("send_at", STAMP, nullable=False),
        sa.Column("next_attempt_at", STAMP, nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("deferrals", sa.Integer(), nullable=False),
        sa.Column("handoff_at", STAMP, nullable=True),
        sa.Column("sent_at", STAMP, nullable=True),
        sa.Column("last_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("delivery_status", sa.JSON(), nullable=True),
        sa.Column("updated_at", STAMP, nullable=False),
        _fk("submissions", "user_id", "users.id", "CASCADE"),
        _fk("submissions", "account_id", "accounts.id", "CASCADE"),
        _fk("submissions", "identity_id", "identities.id", "SET NULL"),
        _fk("submissions", "email_id", "messages.id", "SET NULL"),
        _fk("submissions", "raw_sha256", "blobs.sha256", None),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_submissions")),
        sa.UniqueConstraint(
            "account_id", "message_key", name=op.f("uq_submissions_account_id_message_key")
        ),
    )
    op.create_index(op.f("ix_submissions_user_id"), "submissions", ["user_id"])
    op.create_index(op.f("ix_submissions_email_id"), "submissions", ["email_id"])
    op.create_index(
        "ix_submissions_state_next_attempt_at", "submissions", ["state", "next_attempt_at"]
    )

    op.create_table(
        "failed_sends",
        sa.Column("id", ID, nullable=False),
        sa.Column("submission_id", ID, nullable=False),
        sa.Column("lane", sa.String(10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("code", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("failed_at", STAMP, nullable=False),
        _fk("failed_sends", "submission_id", "submissions.id", "CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_failed_sends")),
        sa.UniqueConstraint("submission_id", name=op.f("uq_failed_sends_submission_id")),
    )
    op.create_index(op.f("ix_failed_sends_failed_at"), "failed_sends", ["failed_at"])

    op.create_table(
        "send_rate_buckets",
        sa.Column("lane", sa.String(10), nullable=False),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("refreshed_at", STAMP, nullable=False),
        sa.PrimaryKeyConstraint("lane", name=op.f("pk_send_rate_buckets")),
    )

    op.create_table(
        "vacation_replies",
        sa.Column("user_id", ID, nullable=False),
        sa.Column("sender_key", sa.Text(), nullable=False),
        sa.Column("sent_at", STAMP, nullable=False),
        _fk("vacation_replies", "user_id", "users.id", "CASCADE"),
        sa.PrimaryKeyConstraint("user_id", "sender_key", name=op.f("pk_vacation_replies")),
    )

    op.create_table(
        "bounces",
        sa.Column("id", ID, nullable=False),
        sa.Column("submission_id", ID, nullable=False),
        sa.Column("message_id", ID, nullable=False),
        sa.Column("recipients", sa.JSON(), nullable=False),
        sa.Column("received_at", STAMP, nullable=False),
        _fk("bounces", "submission_id", "submissions.id", "CASCADE"),
        _fk("bounces", "message_id", "messages.id", "CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bounces")),
        sa.UniqueConstraint(
            "submission_id", "message_id", name=op.f("uq_bounces_submission_id_message_id")
        ),
    )
    op.create_index(op.f("ix_bounces_message_id"), "bounces", ["message_id"])


def downgrade() -> None:
    op.drop_table("bounces")
    op.drop_table("vacation_replies")
    op.drop_table("send_rate_buckets")
    op.drop_table("failed_sends")
    op.drop_table("submissions")
    op.drop_column("accounts", "smtp_secret")
