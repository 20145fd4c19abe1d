"""``mailroom gmail skipped [ACCOUNT] [--forget]``: what the Gmail API could not give.

Lists the skipped ledger of one Gmail account (or of every Gmail account of
the owner) grouped by kind (chats, ids that answered 404, messages a linked
account of the owner holds: Gmailify), as a plain table
or ``--format json``; ``--forget`` deletes an account's rows so the next
listing asks Gmail about those messages again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import click

from mailroom.cli.context import AppContext, format_option, pass_app, plain_errors
from mailroom.config import DEFAULT_OWNER
from mailroom.errors import NotFoundError, SealedWithoutKeys
from mailroom.providers.gmail.skipped_listing import (
    CHAT,
    LINKED,
    NOT_FOUND,
    SkippedRecord,
    list_skipped,
)
from mailroom.reading import user_id
from mailroom.store.reader import Reader

__all__ = ["gmail_group"]

# The listing reads with plain SQL (providers.gmail.skipped_listing), as the other read
# commands do; only --forget, which deletes rows, opens the store through SQLAlchemy, and
# so does a listing that meets a sealed row (a sealing owner's), which needs the keys.

GMAIL = "gmail"  # the provider name of Gmail API accounts
KIND_TITLES = {
    CHAT: "Chats",
    NOT_FOUND: "Listed but not found (404)",
    LINKED: "Stored by a linked account (Gmailify)",
}
_COLUMNS = ("account", "id", "from", "labels", "last seen", "reason")
_CELL_WIDTH = 40  # a table cell longer than this is cut with "…"; JSON has it whole


@click.group("gmail")
def gmail_group() -> None:
    """Gmail accounts: what the Gmail API listed and mailroom could not store."""


def _gmail_accounts(reader: Reader, owner: str, name: str | None) -> dict[int, str]:
    """Id -> name of the named Gmail account of ``owner``, or of all of them; plain errors."""
    user = user_id(reader, owner)
    if name is None:
        rows = reader.rows(
            "SELECT id, name FROM accounts WHERE user_id = :user AND provider = :gmail "
            "ORDER BY name",
            {"user": user, "gmail": GMAIL},
        )
        return {account_id: account_name for account_id, account_name in rows}
    found = reader.rows(
        "SELECT id, provider FROM accounts WHERE user_id = :user AND name = :name",
        {"user": user, "name": name},
    )
    if not found:
        raise NotFoundError(f"{owner!r} has no account called {name!r}.")
    account_id, provider = found[0]
    if provider != GMAIL:
        raise NotFoundError(
            f"The account {name!r} is not a Gmail account (its provider is {provider})."
        )
    return {account_id: name}


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def _as_json(record: SkippedRecord, account: str) -> dict[str, Any]:
    return {
        "account": account,
        "id": record.provider_id,
        "kind": record.kind,
        "reason": record.reason,
        "labels": record.label_ids,
        "headers": record.headers,
        "first_seen": record.first_seen.isoformat(),
        "last_seen": record.last_seen.isoformat(),
    }


def _cell(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _CELL_WIDTH else text[: _CELL_WIDTH - 1] + "…"


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows under the column names, each column as wide as its widest cell."""
    cells = [list(_COLUMNS), *([_cell(c) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(_COLUMNS))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]


def _print_grouped(records: Sequence[SkippedRecord], names: dict[int, str]) -> None:
    """One titled table per kind, in the ledger's order (most recently seen first)."""
    kinds = list(dict.fromkeys(record.kind for record in records))
    for index, kind in enumerate(kinds):
        group = [r for r in records if r.kind == kind]
        if index:
            click.echo("")
        click.echo(f"{KIND_TITLES.get(kind, kind)}: {len(group)}")
        rows = [
            (
                names[r.account_id],
                r.provider_id,
                r.headers.get("from", ""),
                ",".join(r.label_ids),
                _stamp(r.last_seen),
                r.reason,
            )
            for r in group
        ]
        for line in _table(rows):
            click.echo(f"  {line}")


@gmail_group.command("skipped")
@click.argument("account", required=False)
@click.option("--owner", default=DEFAULT_OWNER, show_default=True, help="Whose accounts.")
@click.option(
    "--forget",
    is_flag=True,
    help="Forget ACCOUNT's skipped messages, so the next listing asks Gmail about them again.",
)
@format_option("table", "json")
@pass_app
@plain_errors
def skipped_command(
    app: AppContext, account: str | None, owner: str, forget: bool, output: str
) -> None:
    """List the messages Gmail listed but mailroom could not store, grouped by kind."""
    if forget and account is None:
        raise click.UsageError("Name the account whose skipped messages to forget.")
    names = _gmail_accounts(app.reader, owner, account)
    if forget:
        from mailroom.providers.gmail.skipped import forget_skipped

        with app.existing_store.session() as session:
            forgotten = forget_skipped(session, next(iter(names)))
        if output == "json":
            click.echo(json.dumps({"account": account, "forgotten": forgotten}))
        else:
            click.echo(f"Forgot {forgotten} skipped messages of {account!r}.")
        return
    try:
        records = list_skipped(app.reader, list(names))
    except SealedWithoutKeys:  # a sealing owner's row: read again through a session (keys)
        with app.existing_store.session() as session:
            records = list_skipped(session, list(names))
    if output == "json":
        rows = [_as_json(record, names[record.account_id]) for record in records]
        click.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    if not names:
        click.echo(f"{owner!r} has no Gmail accounts.")
        return
    if not records:
        click.echo("No skipped messages.")
        return
    _print_grouped(records, names)
