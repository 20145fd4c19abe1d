"""Several identities per address, one default per account; system mailbox order

RFC 8621 section 6 lets a user have several identities with the same email
(other names or signatures), so ``identities`` loses its unique
(account_id, email) constraint and keeps a plain index on the pair. The one
default identity of an account (its own address, which cannot be deleted) is
marked by the new ``is_default`` column, and a partial unique index on
``account_id`` where ``is_default`` makes a second default impossible even
when two requests create it at once. Existing rows become the default when
their email is the account's own address (before this revision there was at
most one such row per account).

System labels had ``sort_order`` 0; each now gets the place of its role
(Inbox 1, Starred 2, Snoozed 3, Drafts 4, Sent 5, Archive 6, Spam 7, Trash 8),
unless a client already gave it another order.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# Frozen copy of the role order of this revision (mailroom.labels.resolver).
SYSTEM_SORT_ORDER = {
    "inbox": 1,
    "starred": 2,
    "snoozed": 3,
    "drafts": 4,
    "sent": 5,
    "archive": 6,
    "spam": 7,
    "trash": 8,
}

_accounts = sa.table(
    "accounts",
    sa.column("id", ID),
    sa.column("provider", sa.String),
    sa.column("settings", sa.JSON),
)
_identities = sa.table(
    "identities",
    sa.column("id", ID),
    sa.column("account_id", ID),
    sa.column("email", sa.Text),
    sa.column("is_default", sa.Boolean),
)
_labels = sa.table("labels", sa.column("role", sa.String), sa.column("sort_order", sa.Integer))


def _account_address(settings: Any) -> str:
    """The account's own address as mailroom.jmap.identities read it at this revision."""
    if not isinstance(settings, dict):
        return ""
    for key in ("email", "login", "username"):
        value = str(settings.get(key) or "")
        if "@" in value:
            return value
    return ""


def _mark_defaults() -> None:
    connection = op.get_bind()
    address = {
        account_id: _account_address(settings).lower()
        for account_id, settings in connection.execute(
            sa.select(_accounts.c.id, _accounts.c.settings)
        )
    }
    rows = connection.execute(
        sa.select(_identities.c.id, _identities.c.account_id, _identities.c.email).order_by(
            _identities.c.id
        )
    )
    defaults: dict[int, int] = {}  # account id -> its oldest identity of its own address
    for identity_id, account_id, email in rows:
        if email.lower() == address.get(account_id) and account_id not in defaults:
            defaults[account_id] = identity_id
    if defaults:
        connection.execute(
            sa.update(_identities)
            .where(_identities.c.id.in_(list(defaults.values())))
            .values(is_default=sa.true())
        )


def _order_system_labels() -> None:
    for role, order in SYSTEM_SORT_ORDER.items():
        op.execute(
            sa.update(_labels)
            .where(_labels.c.role == role, _labels.c.sort_order == 0)
            .values(sort_order=order)
        )


def upgrade() -> None:
    op.add_column(
        "identities",
        sa.Column("is_default", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    with op.batch_alter_table("identities") as batch:
        batch.drop_constraint("uq_identities_account_id_email", type_="unique")
    op.create_index("ix_identities_account_id_email", "identities", ["account_id", "email"])
    _mark_defaults()
    op.create_index(
        "uq_identities_default_account_id",
        "identities",
        ["account_id"],
        unique=True,
        postgresql_where=sa.text("is_default"),
        sqlite_where=sa.text("is_default"),
    )
    _order_system_labels()


def downgrade() -> None:
    for role, order in SYSTEM_SORT_ORDER.items():
        op.execute(
            sa.update(_labels)
            .where(_labels.c.role == role, _labels.c.sort_order == order)
            .values(sort_order=0)
        )
    op.drop_index("uq_identities_default_account_id", table_name="identities")
    op.drop_index("ix_identities_account_id_email", table_name="identities")
    # Only the oldest identity of each (account, email) survives the unique constraint again.
    connection = op.get_bind()
    keep = (
        sa.select(sa.func.min(_identities.c.id))
        .group_by(_identities.c.account_id, _identities.c.email)
        .scalar_subquery()
    )
    connection.execute(sa.delete(_identities).where(_identities.c.id.not_in(keep)))
    with op.batch_alter_table("identities") as batch:
        batch.drop_column("is_default")
        batch.create_unique_constraint("uq_identities_account_id_email", ["account_id", "email"])
