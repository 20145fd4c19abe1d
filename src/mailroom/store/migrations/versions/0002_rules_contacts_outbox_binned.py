"""rules, contacts, the propagation outbox, API tokens, user settings, the binned flag

``threads.in_trash`` ("binned": the thread has Trash and no message outside
Trash) is kept by triggers on ``thread_labels`` and on the thread's message
count, so label changes through the ORM, raw SQL, cascades, messages moving
between threads and new messages arriving all keep it right.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
STAMP = sa.DateTime(timezone=True)

BINNED = """(threads.message_count > 0 AND EXISTS (
    SELECT 1 FROM thread_labels tl JOIN labels l ON l.id = tl.label_id
    WHERE tl.thread_id = threads.id AND l.role = 'trash'
      AND tl.message_count >= threads.message_count))"""

SQLITE = [
    f"""CREATE TRIGGER thread_labels_binned_insert AFTER INSERT ON thread_labels
    BEGIN UPDATE threads SET in_trash = {BINNED} WHERE id = NEW.thread_id; END""",
    f"""CREATE TRIGGER thread_labels_binned_update AFTER UPDATE ON thread_labels
    BEGIN UPDATE threads SET in_trash = {BINNED} WHERE id = NEW.thread_id; END""",
    f"""CREATE TRIGGER thread_labels_binned_delete AFTER DELETE ON thread_labels
    BEGIN UPDATE threads SET in_trash = {BINNED} WHERE id = OLD.thread_id; END""",
    f"""CREATE TRIGGER threads_binned_count AFTER UPDATE OF message_count ON threads
    BEGIN UPDATE threads SET in_trash = {BINNED} WHERE id = NEW.id; END""",
]

POSTGRES = [
    f"""CREATE FUNCTION mailroom_thread_binned() RETURNS trigger AS $$
    DECLARE target bigint;
    BEGIN
      IF TG_TABLE_NAME = 'threads' THEN
        target := NEW.id;
      ELSIF TG_OP = 'DELETE' THEN
        target := OLD.thread_id;
      ELSE
        target := NEW.thread_id;
      END IF;
      UPDATE threads SET in_trash = {BINNED} WHERE id = target;
      RETURN NULL;
    END $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER thread_labels_binned AFTER INSERT OR UPDATE OR DELETE ON thread_labels
    FOR EACH ROW EXECUTE FUNCTION mailroom_thread_binned()""",
    """CREATE TRIGGER threads_binned_count AFTER UPDATE OF message_count ON threads
    FOR EACH ROW WHEN (OLD.message_count IS DISTINCT FROM NEW.message_count)
    EXECUTE FUNCTION mailroom_thread_binned()""",
]


def upgrade() -> None:
    op.create_table(
        "contacts",
        sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("email", sa.String(500), nullable=False),
        sa.Column("sent_count", sa.Integer(), nullable=False),
        sa.Column("last_sent_at", STAMP, nullable=True),
        sa.PrimaryKeyConstraint("user_id", "email", name=op.f("pk_contacts")),
    )
    op.create_table(
        "rules",
        sa.Column("id", ID, primary_key=True),
        sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("conditions", sa.JSON(), nullable=False),
        sa.Column("actions", sa.JSON(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("created_at", STAMP, nullable=False),
    )
    op.create_index(op.f("ix_rules_user_id"), "rules", ["user_id"])
    op.create_table(
        "outbox",
        sa.Column("id", ID, primary_key=True),
        sa.Column(
            "account_id", ID, sa.ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False
        ),
        sa.Column(
            "message_id", ID, sa.ForeignKey("messages.id", ondelete="SET NULL"), nullable=True
        ),
        sa.Column("provider_id", sa.String(500), nullable=False),
        sa.Column("operation", sa.String(40), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("next_attempt_at", STAMP, nullable=False),
        sa.Column("created_at", STAMP, nullable=False),
        sa.Column("done_at", STAMP, nullable=True),
    )
    op.create_index(op.f("ix_outbox_message_id"), "outbox", ["message_id"])
    op.create_index("ix_outbox_state_next_attempt_at", "outbox", ["state", "next_attempt_at"])
    op.create_table(
        "api_tokens",
        sa.Column("id", ID, primary_key=True),
        sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("created_at", STAMP, nullable=False),
        sa.Column("last_used_at", STAMP, nullable=True),
    )
    op.create_index(op.f("ix_api_tokens_user_id"), "api_tokens", ["user_id"])
    op.add_column(
        "threads", sa.Column("in_trash", sa.Boolean(), server_default=sa.false(), nullable=False)
    )
    op.add_column("users", sa.Column("settings", sa.JSON(), server_default="{}", nullable=False))
    for statement in SQLITE if op.get_bind().dialect.name == "sqlite" else POSTGRES:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER IF EXISTS thread_labels_binned_{name}")
        op.execute("DROP TRIGGER IF EXISTS threads_binned_count")
    else:
        op.execute("DROP TRIGGER IF EXISTS thread_labels_binned ON thread_labels")
        op.execute("DROP TRIGGER IF EXISTS threads_binned_count ON threads")
        op.execute("DROP FUNCTION IF EXISTS mailroom_thread_binned()")
    # Plain DROP COLUMN (SQLite >= 3.35): a batch table copy would break the triggers.
    op.drop_column("users", "settings")
    op.drop_column("threads", "in_trash")
    op.drop_table("api_tokens")
    op.drop_table("outbox")
    op.drop_table("rules")
    op.drop_table("contacts")
