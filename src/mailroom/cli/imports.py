"""``mailroom import PATH``: bring an mbox, Maildir or .eml folder into the store."""

from __future__ import annotations

from pathlib import Path

import click

from mailroom.cli.context import AppContext, pass_app, plain_errors, progress_bar
from mailroom.owners import DEFAULT_OWNER
from mailroom.providers.local import import_path, open_source


@click.command("import")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--account", default="local", show_default=True, help="Account to import into.")
@click.option("--owner", default=DEFAULT_OWNER, show_default=True, help="User owning the account.")
@pass_app
@plain_errors
def import_command(app: AppContext, path: Path, account: str, owner: str) -> None:
    """Import an mbox file, a Maildir or a folder of .eml files (again: imports nothing new)."""
    source = open_source(path)
    store = app.store
    with progress_bar() as progress:
        task = progress.add_task(f"Importing {source.kind} {path}", total=source.count())
        summary = import_path(
            store,
            path,
            owner=owner,
            account=account,
            source=source,
            progress=lambda n: progress.advance(task, n),
        )
    click.echo(f"{path}: {summary.line()}.")
    if summary.repaired:
        # "repaired" alone left people guessing what happened to their mail.
        click.echo(
            f"  {summary.repaired} message{'s were' if summary.repaired != 1 else ' was'} stored "
            "with parse notes (a damaged part was decoded as well as it could be); "
            "`mailroom list --repaired` lists them and `mailroom show ID` shows the notes."
        )
    if summary.failed:
        for key, reason in summary.failed[1:20]:
            click.echo(f"  failed: {key}: {reason}", err=True)
