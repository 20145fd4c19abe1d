"""JMAP: the change-log retention floor, and Mailbox changes for every label write

``change_floors`` holds, per (user, type), the highest change-log sequence
that ``prune_changes`` deleted: a JMAP state below it can no longer be
diffed (``cannotCalculateChanges``).

Labels are JMAP mailboxes. Triggers on ``labels`` write the Mailbox
``created`` / ``updated`` (name, parent or role changed) / ``destroyed``
change in the same transaction, so a label created by a sync, an import or
any later code path reaches ``Mailbox/changes`` and push without each writer
remembering to log it (the same reasoning as the counter triggers of 0001).
A label deleted together with its user logs nothing.

Revision ID: 0005
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0002"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
STAMP = sa.DateTime(timezone=True)

_SQLITE_NOW = "strftime('%Y-%m-%d %H:%M:%f', 'now')"
_COLUMNS = "changes (user_id, type, object_id, kind, created_at)"

SQLITE = [
    f"""CREATE TRIGGER labels_jmap_insert AFTER INSERT ON labels
    BEGIN INSERT INTO {_COLUMNS}
      VALUES (NEW.user_id, 'Mailbox', NEW.id, 'created', {_SQLITE_NOW}); END""",
    f"""CREATE TRIGGER labels_jmap_update AFTER UPDATE OF name, parent_id, role ON labels
    WHEN OLD.name IS NOT NEW.name OR OLD.parent_id IS NOT NEW.parent_id
      OR OLD.role IS NOT NEW.role
    BEGIN INSERT INTO {_COLUMNS}
      VALUES (NEW.user_id, 'Mailbox', NEW.id, 'updated', {_SQLITE_NOW}); END""",
    f"""CREATE TRIGGER labels_jmap_delete AFTER DELETE ON labels
    BEGIN INSERT INTO {_COLUMNS}
      SELECT OLD.user_id, 'Mailbox', OLD.id, 'destroyed', {_SQLITE_NOW}
      WHERE EXISTS (SELECT 1 FROM users WHERE id = OLD.user_id); END""",
]

POSTGRES = [
    f"""CREATE FUNCTION mailroom_label_change() RETURNS trigger AS $$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        INSERT INTO {_COLUMNS} VALUES (NEW.user_id, 'Mailbox', NEW.id, 'created', now());
      ELSIF TG_OP = 'UPDATE' THEN
        IF OLD.name IS DISTINCT FROM NEW.name OR OLD.parent_id IS DISTINCT FROM NEW.parent_id
           OR OLD.role IS DISTINCT FROM NEW.role THEN
          INSERT INTO {_COLUMNS} VALUES (NEW.user_id, 'Mailbox', NEW.id, 'updated', now());
        END IF;
      ELSE
        INSERT INTO {_COLUMNS}
          SELECT OLD.user_id, 'Mailbox', OLD.id, 'destroyed', now()
          WHERE EXISTS (SELECT 1 FROM users WHERE id = OLD.user_id);
      END IF;
      RETURN NULL;
    END $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER labels_jmap_change AFTER INSERT OR UPDATE OR DELETE ON labels
    FOR EACH ROW EXECUTE FUNCTION mailroom_label_change()""",
]


def upgrade() -> None:
    op.create_table(
        "change_floors",
        sa.Column("user_id", ID, sa.ForeignKey("users.id", ondelete="CASCADE"), nullable=False),
        sa.Column("type", sa.String(20), nullable=False),
        sa.Column("seq", ID, nullable=False),
        sa.Column("updated_at", STAMP, nullable=False),
        sa.PrimaryKeyConstraint("user_id", "type", name=op.f("pk_change_floors")),
    )
    for statement in SQLITE if op.get_bind().dialect.name == "sqlite" else POSTGRES:
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER IF EXISTS labels_jmap_{name}")
    else:
        op.execute("DROP TRIGGER IF EXISTS labels_jmap_change ON labels")
        op.execute("DROP FUNCTION IF EXISTS mailroom_label_change()")
    op.drop_table("change_floors")
