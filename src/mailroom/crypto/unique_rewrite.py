"""Writing re-hashed look-up values into a column unique per account, never onto a taken one.

A key rotation re-hashes values that are unique within an account (a sealed
submission's ``message_key``, a message's keyed IMAP ``provider_id``). Two rows
could end with the same new value (the same message stored or queued twice, under
two versions, as a rotation began): the first keeps the new value, the other keeps
its old one and is logged, instead of the whole batch failing on the constraint.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import bindparam, select, tuple_, update
from sqlalchemy.orm import Session

__all__ = ["rewrite_unique"]

log = logging.getLogger(__name__)


def rewrite_unique(
    session: Session, table_name: str, column: str, changes: list[dict[str, Any]], what: str
) -> None:
    """Write each change (``b_id``, ``b_account``, ``b_value``) into ``column`` of its row.

    A value another row of the same account (``account_id``) holds already, or an earlier
    change of this call took, is not written; ``what`` names the row in the log line.
    """
    if not changes:
        return
    from mailroom.store.models import Base

    table = Base.metadata.tables[table_name]
    target = table.c[column]
    wanted = [(c["b_account"], c["b_value"]) for c in changes]
    held = session.execute(
        select(table.c.account_id, target).where(tuple_(table.c.account_id, target).in_(wanted))
    )
    taken = {(int(account), str(value)) for account, value in held}
    free: list[dict[str, Any]] = []
    for change in changes:
        slot = (change["b_account"], change["b_value"])
        if slot in taken:
            log.warning(
                "Key rotation: %s %s keeps its old %s; another of its account holds the new one",
                what,
                change["b_id"],
                column,
            )
            continue
        taken.add(slot)
        free.append(change)
    if free:
        session.connection().execute(
            update(table)
            .where(table.c.id == bindparam("b_id"))
            .values({column: bindparam("b_value")}),
            free,
        )
