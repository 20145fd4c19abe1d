"""The skipped ledger of owners whose mail is sealed: its headers and reasons sealed too.

``skipped_messages`` is provider-neutral: the Gmail provider records chats,
ids that answer 404 and Gmailify duplicates with the message's address
headers (From, To, Cc, Delivered-To); the IMAP fetcher records messages it
gave up on with the failure's text, which quotes whatever the server or the
exception said (a parse error may quote a header). Whom an owner hears from
is as private as what they read, so for an owner whose new mail is sealed
(``crypto.sealing.seals_new_mail``) a row's ``headers`` and ``reason`` are
``mrf1.`` values under the owner's data key, bound to ``skipped_messages``,
the column and the row id; ``headers`` holds the sealed JSON dump as a JSON
string. A clear row's ``headers`` is a JSON object, so a row is sealed
exactly when its ``headers`` is a string: the reason needs no flag of its
own that could disagree.

A sealed value is bound to its row id, which the insert makes (or, for the
Gmail ledger's upsert, the row already there has): :func:`write_ledger`
runs the writer's INSERT with its own conflict clause on placeholders,
RETURNING the ids of the rows it inserted or updated, and writes the sealed
values by id in the same transaction (``crypto.sealed_rows``), so the clear
text reaches neither the table nor its write-ahead log. A row the conflict
clause leaves alone (ON CONFLICT DO NOTHING) returns no id and keeps what it
had. Readers open a sealed row with :func:`open_ledger_row`; a bare file
reader (no keys) gets :class:`~mailroom.errors.SealedWithoutKeys` and reads
again through a session of the store.

Kind, labels (Gmail label ids, an IMAP folder path), provider id and times
stay clear, as they do for messages. ``crypto.columns`` registers both
columns for owner key rotations; owner deletion deletes the rows
(``crypto.shredding``, through the owner's accounts).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Table, select

from mailroom.crypto.fields import TEXT_PREFIX, from_text
from mailroom.crypto.sealed_rows import write_sealed_rows
from mailroom.crypto.sealing import require_cipher, sealing_cipher
from mailroom.errors import SealedWithoutKeys
from mailroom.store.models import Account, SkippedMessage

if TYPE_CHECKING:
    from sqlalchemy.dialects.postgresql import Insert as PostgresInsert
    from sqlalchemy.dialects.sqlite import Insert as SqliteInsert
    from sqlalchemy.orm import Session

__all__ = [
    "OWNER_WHERE",
    "SEALED_COLUMNS",
    "SEALED_WHERE",
    "TABLE",
    "open_ledger_row",
    "write_ledger",
]

TABLE = "skipped_messages"
SEALED_COLUMNS = ("headers", "reason")
_JSON_COLUMNS = ("headers",)
# What a sealed row holds between its insert (or update) and its sealed update.
_PLACEHOLDERS: Mapping[str, Any] = {"headers": {}, "reason": ""}
# The owner's rows (SQL, ``:owner``) and, of those, the sealed ones.
OWNER_WHERE = "account_id IN (SELECT id FROM accounts WHERE user_id = :owner)"
SEALED_WHERE = f"CAST(headers AS TEXT) LIKE '\"{TEXT_PREFIX}%'"
_WHAT = "A skipped message's record"


def write_ledger(
    session: Session,
    statement: SqliteInsert | PostgresInsert,
    rows: Sequence[Mapping[str, Any]],
) -> None:
    """Run ``statement`` (an INSERT into the ledger, with its conflict clause) for ``rows``.

    While new mail is sealed, the rows go in with placeholders and their headers and
    reason are written sealed by id; otherwise as given.
    """
    if not rows:
        return
    if sealing_cipher(session) is None:
        session.execute(statement, list(rows))
        return
    table = cast(Table, SkippedMessage.__table__)
    clear = {
        (row["account_id"], row["provider_id"]): {c: row[c] for c in SEALED_COLUMNS} for row in rows
    }
    written = session.execute(
        statement.returning(table.c.id, table.c.account_id, table.c.provider_id),
        [{**row, **_PLACEHOLDERS} for row in rows],
    ).all()
    accounts = select(Account.id, Account.user_id).where(
        Account.id.in_({account for account, _pid in clear})
    )
    owners = {int(account): int(owner) for account, owner in session.execute(accounts)}
    by_owner: dict[int, dict[int, Mapping[str, Any]]] = {}
    for row_id, account_id, provider_id in written:
        by_owner.setdefault(owners[account_id], {})[row_id] = clear[(account_id, provider_id)]
    for owner, sealed in by_owner.items():
        write_sealed_rows(session, SkippedMessage, owner, sealed, _JSON_COLUMNS)


def open_ledger_row(
    session: Session | None, owner: int, row_id: int, headers: str, reason: str
) -> tuple[dict[str, str], str]:
    """The clear headers and reason of a sealed row (``headers`` the sealed JSON string's text).

    ``session`` None (a bare file reader, no keys) raises SealedWithoutKeys: the caller
    reads again through a session of the store, which has the keys.
    """
    if session is None:
        raise SealedWithoutKeys(f"{_WHAT} is sealed, and this reader of the store has no keys.")
    cipher = require_cipher(session, _WHAT)
    opened = cipher.decrypt_text(owner, TABLE, "headers", row_id, from_text(headers))
    return (
        dict(json.loads(opened)),
        cipher.decrypt_text(owner, TABLE, "reason", row_id, from_text(reason)),
    )
