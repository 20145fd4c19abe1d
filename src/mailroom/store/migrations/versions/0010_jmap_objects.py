"""JMAP objects: keywords, mailbox order and subscription, uploads, push, vacation, identities

``message_keywords`` holds every keyword of a message but ``$seen`` (kept in
``messages.seen_at``) and ``$flagged`` (the Starred label). ``labels`` gains
the JMAP Mailbox ``sortOrder`` and ``isSubscribed``. ``jmap_uploads`` makes a
blob in ``blobs`` one user's upload; ``push_subscriptions``,
``vacation_responses`` and ``identities`` are the RFC 8620/8621 objects of
those names.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
STAMP = sa.DateTime(timezone=True)


def _user_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["user_id"], ["users.id"], name=op.f(f"fk_{table}_user_id_users"), ondelete="CASCADE"
    )


def upgrade() -> None:
    op.create_table(
        "message_keywords",
        sa.Column("message_id", ID, nullable=False),
        sa.Column("keyword", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["messages.id"],
            name=op.f("fk_message_keywords_message_id_messages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("message_id", "keyword", name=op.f("pk_message_keywords")),
    )
    op.create_index(op.f("ix_message_keywords_keyword"), "message_keywords", ["keyword"])

    # Plain ALTER TABLE on both stores: a batch rebuild of labels would break the
    # SQLite triggers that name it.
    op.add_column(
        "labels", sa.Column("sort_order", sa.Integer(), server_default="0", nullable=False)
    )
    op.add_column(
        "labels", sa.Column("is_subscribed", sa.Boolean(), server_default=sa.true(), nullable=False)
    )

    op.create_table(
        "jmap_uploads",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("type", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("created_at", STAMP, nullable=False),
        sa.Column("expires_at", STAMP, nullable=True),
        sa.ForeignKeyConstraint(
            ["sha256"], ["blobs.sha256"], name=op.f("fk_jmap_uploads_sha256_blobs")
        ),
        _user_fk("jmap_uploads"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jmap_uploads")),
    )
    op.create_index(op.f("ix_jmap_uploads_expires_at"), "jmap_uploads", ["expires_at"])
    op.create_index("ix_jmap_uploads_user_id_sha256", "jmap_uploads", ["user_id", "sha256"])

    op.create_table(
        "push_subscriptions",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("device_client_id", sa.Text(), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("keys", sa.JSON(), nullable=True),
        sa.Column("verification_code", sa.String(64), nullable=False),
        sa.Column("verified", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("expires_at", STAMP, nullable=True),
        sa.Column("types", sa.JSON(), nullable=True),
        sa.Column("created_at", STAMP, nullable=False),
        _user_fk("push_subscriptions"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_push_subscriptions")),
    )
    op.create_index(op.f("ix_push_subscriptions_user_id"), "push_subscriptions", ["user_id"])

    op.create_table(
        "vacation_responses",
        sa.Column("user_id", ID, nullable=False),
        sa.Column("is_enabled", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("from_date", STAMP, nullable=True),
        sa.Column("to_date", STAMP, nullable=True),
        sa.Column("subject", sa.Text(), nullable=True),
        sa.Column("text_body", sa.Text(), nullable=True),
        sa.Column("html_body", sa.Text(), nullable=True),
        sa.Column("updated_at", STAMP, nullable=False),
        _user_fk("vacation_responses"),
        sa.PrimaryKeyConstraint("user_id", name=op.f("pk_vacation_responses")),
    )

    op.create_table(
        "identities",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("account_id", ID, nullable=False),
        sa.Column("email", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("reply_to", sa.JSON(), nullable=True),
        sa.Column("bcc", sa.JSON(), nullable=True),
        sa.Column("text_signature", sa.Text(), nullable=False),
        sa.Column("html_signature", sa.Text(), nullable=False),
        sa.Column("created_at", STAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name=op.f("fk_identities_account_id_accounts"),
            ondelete="CASCADE",
        ),
        _user_fk("identities"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_identities")),
        sa.UniqueConstraint("account_id", "email", name=op.f("uq_identities_account_id_email")),
    )
    op.create_index(op.f("ix_identities_user_id"), "identities", ["user_id"])


def downgrade() -> None:
    op.drop_table("identities")
    op.drop_table("vacation_responses")
    op.drop_table("push_subscriptions")
    op.drop_table("jmap_uploads")
    op.drop_column("labels", "is_subscribed")
    op.drop_column("labels", "sort_order")
    op.drop_table("message_keywords")
