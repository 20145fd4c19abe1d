"""Audit log: who signed in, made or revoked a token, added an account, made a backup ...

``audit_log`` holds one row per security-relevant action (``mailroom.audit``):
when, the action, the user it concerns (name and id, no foreign key: the row
outlives a deleted user), how it came (``web``, ``jmap``, ``smtp``, ``cli``),
from where (the client address, or the OS user of a command) and a detail.

Rows are never updated: a trigger on each store refuses an UPDATE, so a bug
or a hand-written statement cannot rewrite history. Deleting (pruning old
rows) stays possible. Text from people or clients is ``TEXT``; the action
and channel are names mailroom makes and stay ``VARCHAR``.

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
STAMP = sa.DateTime(timezone=True)
_REFUSAL = "audit_log rows are never updated"

SQLITE = [
    f"""CREATE TRIGGER audit_log_never_updated BEFORE UPDATE ON audit_log
    BEGIN
      SELECT RAISE(ABORT, '{_REFUSAL}');
    END""",
]

POSTGRES = [
    f"""CREATE FUNCTION mailroom_audit_log_never_updated() RETURNS trigger AS $$
    BEGIN
      RAISE EXCEPTION '{_REFUSAL}';
    END $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER audit_log_never_updated BEFORE UPDATE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION mailroom_audit_log_never_updated()""",
]


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", ID, nullable=False),
        sa.Column("at", STAMP, nullable=False),
        sa.Column("action", sa.String(40), nullable=False),
        sa.Column("user_id", ID, nullable=True),
        sa.Column("user_name", sa.Text(), nullable=True),
        sa.Column("via", sa.String(10), nullable=False),
        sa.Column("origin", sa.Text(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False, server_default=""),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_at"), "audit_log", ["at"])
    op.create_index(op.f("ix_audit_log_user_name_at"), "audit_log", ["user_name", "at"])
    for statement in POSTGRES if op.get_bind().dialect.name == "postgresql" else SQLITE:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS audit_log_never_updated ON audit_log")
        op.execute("DROP FUNCTION IF EXISTS mailroom_audit_log_never_updated()")
    op.drop_index(op.f("ix_audit_log_user_name_at"), table_name="audit_log")
    op.drop_index(op.f("ix_audit_log_at"), table_name="audit_log")
    op.drop_table("audit_log")
