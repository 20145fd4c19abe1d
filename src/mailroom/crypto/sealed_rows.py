"""Sealing columns of rows just inserted, by row id, in the inserting transaction.

A sealed value is bound to its row id (``crypto.fields``), which the insert
makes: writers of sealed rows insert placeholders, then hand the clear
values here, so the clear text never reaches the table or its write-ahead
log (webhook delivery bodies, message events; messages themselves go
through ``crypto.message_fields``, which can seal in an import's lane).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Table, bindparam, update

from mailroom.crypto.fields import to_text
from mailroom.crypto.sealing import require_cipher

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from mailroom.store.models.base import Base


def write_sealed_rows(
    session: Session,
    model: type[Base],
    owner: int,
    rows: Mapping[int, Mapping[str, Any]],
    json_columns: Collection[str] = (),
) -> None:
    """Seal and write ``rows`` (row id → clear column values) of ``owner``'s ``model`` rows.

    Every row names the same columns; None stays None, a JSON column's value is dumped
    first (the column then holds the sealed text as a JSON string).
    """
    if not rows:
        return
    table = cast(Table, model.__table__)
    seal = require_cipher(session, "New mail").sealer(owner)
    columns = list(next(iter(rows.values())))
    params = []
    for row_id, values in rows.items():
        sealed: dict[str, Any] = {"_row": row_id}
        for column in columns:
            value = values.get(column)
            if value is not None:
                plain = json.dumps(value, ensure_ascii=False) if column in json_columns else value
                value = to_text(seal(table.name, column, row_id, str(plain)))
            sealed[column] = value
        params.append(sealed)
    session.connection().execute(
        update(table)
        .where(table.c.id == bindparam("_row"))
        .values({column: bindparam(column) for column in columns}),
        params,
    )
