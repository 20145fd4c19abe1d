"""Looking at the store: ``list``, ``search``, ``show`` and ``explain``."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from mailroom.cli.context import AppContext, echo_json, pass_app, plain_errors
from mailroom.owners import DEFAULT_OWNER, get_user
from mailroom.reading import list_messages, message_detail, search_ids

owner_option = click.option(
    "--owner", default=DEFAULT_OWNER, show_default=True, help="Whose mail to look at."
)


def _print(rows: list[dict[str, object]], output: str) -> None:
    if output == "jsonl":
        for row in rows:
            echo_json(row)
        return
    table = Table("id", "thread", "received", "from", "subject", "category", "labels")
    for row in rows:
        table.add_row(
            str(row["id"]),
            str(row["thread_id"]),
            str(row["received_at"])[:16],
            str(row["from"]),
            str(row["subject"])[:60],
            str(row["category"]),
            ",".join(row["labels"]),  # type: ignore[arg-type]
        )
    Console().print(table)


format_option = click.option(
    "--format",
    "output",
    type=click.Choice(["table", "jsonl"]),
    default="table",
    show_default=True,
    help="jsonl prints one JSON object per message.",
)


@click.command("list")
@owner_option
@format_option
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many.")
@pass_app
@plain_errors
def list_command(app: AppContext, owner: str, output: str, limit: int | None) -> None:
    """List messages, newest first."""
    with app.store.session() as session:
        user = get_user(session, owner)
        rows = list_messages(session, user.id, limit=limit)
    _print(rows, output)


@click.command("search")
@click.argument("query")
@owner_option
@format_option
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@pass_app
@plain_errors
def search_command(app: AppContext, query: str, owner: str, output: str, limit: int) -> None:
    """Full-text search over subject, participants and body (all words must occur)."""
    with app.store.session() as session:
        user = get_user(session, owner)
        ids = search_ids(session, user.id, query, limit)
        rows = list_messages(session, user.id, ids=ids) if ids else []
    if not rows and output == "table":
        click.echo(f"No message matches {query!r}.")
        return
    _print(rows, output)


@click.command("show")
@click.argument("message", type=int)
@owner_option
@pass_app
@plain_errors
def show_command(app: AppContext, message: int, owner: str) -> None:
    """Print one message as JSON, with its text body and parse notes."""
    with app.store.session() as session:
        user = get_user(session, owner)
        echo_json(message_detail(session, user.id, message))


@click.command("explain")
@click.argument("message", type=int)
@owner_option
@pass_app
@plain_errors
def explain_command(app: AppContext, message: int, owner: str) -> None:
    """Say which inbox tab a message is in and why (recomputed from stored data)."""
    from mailroom.categories.recompute import explain

    with app.store.session() as session:
        user = get_user(session, owner)
        why = explain(session, user.id, message)
    for line in why.lines():
        click.echo(line)
