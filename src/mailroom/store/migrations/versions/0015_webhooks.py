"""Webhooks: endpoints, their cursors, deliveries, and account events written by triggers

``webhook_endpoints`` (a user's URL, sealed secret, wanted event types,
active flag), ``webhook_cursors`` (how far each endpoint has read each
source), ``webhook_deliveries`` (one event for one endpoint, unique per
endpoint and event id) and ``account_events``.

Account events have no other durable record, so triggers on ``accounts``
write them in the transaction that changes the account, whatever code path
it is (the reasoning of the counter triggers of 0001 and the label triggers
of 0005): a status change writes ``accountStatusChanged`` (and
``authenticationError`` when the new status is ``auth_error``), the first
``import_finished_at`` writes ``accountInitialized``.

URLs, reasons and bodies are ``TEXT``; event ids and types, states and
sources are names mailroom makes and stay ``VARCHAR``.

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
STAMP = sa.DateTime(timezone=True)

_SQLITE_NOW = "strftime('%Y-%m-%d %H:%M:%f', 'now')"
_COLUMNS = "account_events (user_id, account_id, type, status, previous_status, reason, created_at)"

SQLITE = [
    f"""CREATE TRIGGER accounts_event_status AFTER UPDATE OF status ON accounts
    WHEN OLD.status IS NOT NEW.status
    BEGIN
      INSERT INTO {_COLUMNS} VALUES (NEW.user_id, NEW.id, 'accountStatusChanged', NEW.status,
        OLD.status, NEW.status_reason, {_SQLITE_NOW});
      INSERT INTO {_COLUMNS} SELECT NEW.user_id, NEW.id, 'authenticationError', NEW.status,
        OLD.status, NEW.status_reason, {_SQLITE_NOW} WHERE NEW.status = 'auth_error';
    END""",
    f"""CREATE TRIGGER accounts_event_import AFTER UPDATE OF import_finished_at ON accounts
    WHEN OLD.import_finished_at IS NULL AND NEW.import_finished_at IS NOT NULL
    BEGIN
      INSERT INTO {_COLUMNS} VALUES (NEW.user_id, NEW.id, 'accountInitialized', NEW.status,
        NULL, NULL, {_SQLITE_NOW});
    END""",
]

POSTGRES = [
    f"""CREATE FUNCTION mailroom_account_event() RETURNS trigger AS $$
    BEGIN
      IF OLD.status IS DISTINCT FROM NEW.status THEN
        INSERT INTO {_COLUMNS} VALUES (NEW.user_id, NEW.id, 'accountStatusChanged', NEW.status,
          OLD.status, NEW.status_reason, now());
        IF NEW.status = 'auth_error' THEN
          INSERT INTO {_COLUMNS} VALUES (NEW.user_id, NEW.id, 'authenticationError', NEW.status,
            OLD.status, NEW.status_reason, now());
        END IF;
      END IF;
      IF OLD.import_finished_at IS NULL AND NEW.import_finished_at IS NOT NULL THEN
        INSERT INTO {_COLUMNS} VALUES (NEW.user_id, NEW.id, 'accountInitialized', NEW.status,
          NULL, NULL, now());
      END IF;
      RETURN NULL;
    END $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER accounts_event AFTER UPDATE OF status, import_finished_at ON accounts
    FOR EACH ROW EXECUTE FUNCTION mailroom_account_event()""",
]


def upgrade() -> None:
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("secret", sa.LargeBinary(), nullable=True),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        sa.Column("created_at", STAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_webhook_endpoints_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_endpoints")),
    )
    op.create_index("ix_webhook_endpoints_user_id", "webhook_endpoints", ["user_id"])

    op.create_table(
        "webhook_cursors",
        sa.Column("endpoint_id", ID, nullable=False),
        sa.Column("source", sa.String(20), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["endpoint_id"],
            ["webhook_endpoints.id"],
            name=op.f("fk_webhook_cursors_endpoint_id_webhook_endpoints"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("endpoint_id", "source", name=op.f("pk_webhook_cursors")),
    )

    op.create_table(
        "account_events",
        sa.Column("id", ID, nullable=False),
        sa.Column("user_id", ID, nullable=False),
        sa.Column("account_id", ID, nullable=False),
        sa.Column("type", sa.String(30), nullable=False),
        sa.Column("status", sa.String(20), nullable=True),
        sa.Column("previous_status", sa.String(20), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", STAMP, nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"],
            ["users.id"],
            name=op.f("fk_account_events_user_id_users"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["account_id"],
            ["accounts.id"],
            name=op.f("fk_account_events_account_id_accounts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_account_events")),
    )
    op.create_index("ix_account_events_user_id_id", "account_events", ["user_id", "id"])

    op.create_table(
        "webhook_deliveries",
        sa.Column("id", ID, nullable=False),
        sa.Column("endpoint_id", ID, nullable=False),
        sa.Column("event_id", sa.String(100), nullable=False),
        sa.Column("event_type", sa.String(30), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", STAMP, nullable=False),
        sa.Column("lease_token", sa.String(32), nullable=True),
        sa.Column("leased_until", STAMP, nullable=True),
        sa.Column("last_code", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", STAMP, nullable=False),
        sa.Column("delivered_at", STAMP, nullable=True),
        sa.ForeignKeyConstraint(
            ["endpoint_id"],
            ["webhook_endpoints.id"],
            name=op.f("fk_webhook_deliveries_endpoint_id_webhook_endpoints"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhook_deliveries")),
        sa.UniqueConstraint(
            "endpoint_id", "event_id", name=op.f("uq_webhook_deliveries_endpoint_id_event_id")
        ),
    )
    op.create_index(
        "ix_webhook_deliveries_state_next_attempt_at",
        "webhook_deliveries",
        ["state", "next_attempt_at"],
    )
    for statement in SQLITE if op.get_bind().dialect.name == "sqlite" else POSTGRES:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS accounts_event_status")
        op.execute("DROP TRIGGER IF EXISTS accounts_event_import")
    else:
        op.execute("DROP TRIGGER IF EXISTS accounts_event ON accounts")
        op.execute("DROP FUNCTION IF EXISTS mailroom_account_event()")
    op.drop_index("ix_webhook_deliveries_state_next_attempt_at", table_name="webhook_deliveries")
    op.drop_table("webhook_deliveries")
    op.drop_index("ix_account_events_user_id_id", table_name="account_events")
    op.drop_table("account_events")
    op.drop_table("webhook_cursors")
    op.drop_index("ix_webhook_endpoints_user_id", table_name="webhook_endpoints")
    op.drop_table("webhook_endpoints")
