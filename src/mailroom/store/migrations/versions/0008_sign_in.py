"""Sign-in: web sessions, failed sign-ins for the lock-out, and API token expiry

``web_sessions`` holds the SHA-256 of each web session cookie (never the
cookie itself); ``sign_in_failures`` one row per failed sign-in and limiter
key, shared by every HTTP process of a store; ``api_tokens.expires_at`` is
the optional end of a token (NULL: never).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
STAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.add_column("api_tokens", sa.Column("expires_at", STAMP, nullable=True))
    op.create_table(
        "web_sessions",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=False),
        sa.Column("csrf_token", sa.String(64), nullable=False),
        sa.Column("user_agent", sa.Text(), nullable=False),
        sa.Column("created_at", STAMP, nullable=False),
        sa.Column("last_seen_at", STAMP, nullable=False),
        sa.Column("expires_at", STAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_web_sessions_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_web_sessions")),
        sa.UniqueConstraint("token_sha256", name=op.f("uq_web_sessions_token_sha256")),
    )
    op.create_index(op.f("ix_web_sessions_user_id"), "web_sessions", ["user_id"])
    op.create_index(op.f("ix_web_sessions_expires_at"), "web_sessions", ["expires_at"])
    op.create_table(
        "sign_in_failures",
        sa.Column("id", ID, nullable=False),
        sa.Column("key", sa.String(80), nullable=False),
        sa.Column("failed_at", STAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sign_in_failures")),
    )
    op.create_index("ix_sign_in_failures_key_failed_at", "sign_in_failures", ["key", "failed_at"])
    op.create_index(op.f("ix_sign_in_failures_failed_at"), "sign_in_failures", ["failed_at"])


def downgrade() -> None:
    op.drop_table("sign_in_failures")
    op.drop_table("web_sessions")
    op.drop_column("api_tokens", "expires_at")
