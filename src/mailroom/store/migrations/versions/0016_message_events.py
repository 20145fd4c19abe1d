"""Events found in mail, and each user's calendar feed token

``message_events``: what the events step extracted from a message's raw HTML
(schema.org JSON-LD and microdata: Event, FlightReservation,
LodgingReservation, EventReservation, ParcelDelivery), one row per item,
unique per ``(message_id, position)`` so a rerun or a backfill never doubles
a message's events. Start and end are UTC; ``tzid`` keeps the IANA zone the
mail named (the feed writes the time in it), ``all_day`` a date without a
time. Text from mail (summary, location, zone, the item's JSON) is ``TEXT``.

``calendar_feeds``: one secret feed token per user, only its SHA-256 (a new
token replaces the old, which then stops working).

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
STAMP = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "message_events",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("message_id", ID, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(30), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("location", sa.Text(), nullable=True),
        sa.Column("starts_at", STAMP, nullable=True),
        sa.Column("ends_at", STAMP, nullable=True),
        sa.Column("all_day", sa.Boolean(), nullable=False),
        sa.Column("tzid", sa.Text(), nullable=True),
        sa.Column("source", sa.JSON(), nullable=False),
        sa.Column("created_at", STAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_message_events_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["messages.id"],
            name=op.f("fk_message_events_message_id_messages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_message_events")),
        sa.UniqueConstraint(
            "message_id", "position", name=op.f("uq_message_events_message_id_position")
        ),
    )
    op.create_index(
        "ix_message_events_user_id_starts_at", "message_events", ["user_id", "starts_at"]
    )
    op.create_table(
        "calendar_feeds",
        sa.Column("user_id", ID, nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=False),
        sa.Column("created_at", STAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_calendar_feeds_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("user_id", name=op.f("pk_calendar_feeds")),
        sa.UniqueConstraint("token_sha256", name=op.f("uq_calendar_feeds_token_sha256")),
    )


def downgrade() -> None:
    op.drop_table("calendar_feeds")
    op.drop_index("ix_message_events_user_id_starts_at", table_name="message_events")
    op.drop_table("message_events")
