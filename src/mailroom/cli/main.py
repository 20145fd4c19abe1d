"""Entry point: ``mailroom [--data-dir D] [--database-url U] COMMAND``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mailroom import __version__
from mailroom.cli.accounts import account_group, accounts_command
from mailroom.cli.backfill import backfill_group
from mailroom.cli.categories import categories_group
from mailroom.cli.context import AppContext, setup_logging
from mailroom.cli.imports import import_command
from mailroom.cli.inspect import explain_command, list_command, search_command, show_command
from mailroom.cli.keys import keys_group
from mailroom.cli.labels import COMMANDS as LABEL_COMMANDS
from mailroom.cli.rules import rules_group
from mailroom.cli.serve import serve_command
from mailroom.cli.sync import sync_command
from mailroom.cli.users import token_group, user_group
from mailroom.cli.workers import COMMANDS as WORKER_COMMANDS
from mailroom.errors import MailroomError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mailroom")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="MAILROOM_DATA_DIR",
    help="Where mailroom keeps its data (env MAILROOM_DATA_DIR).",
)
@click.option(
    "--database-url",
    envvar="MAILROOM_DATABASE_URL",
    help="SQLAlchemy URL of the store; default is SQLite in the data dir "
    "(env MAILROOM_DATABASE_URL).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log progress details to stderr.")
@click.pass_context
def cli(ctx: click.Context, data_dir: Path | None, database_url: str | None, verbose: bool) -> None:
    """mailroom: every mail account in one database, threaded, sorted and served."""
    setup_logging(verbose)
    ctx.obj = AppContext(data_dir=data_dir, database_url=database_url)


cli.add_command(import_command)
cli.add_command(list_command)
cli.add_command(search_command)
cli.add_command(show_command)
cli.add_command(explain_command)
cli.add_command(serve_command)
cli.add_command(rules_group)
cli.add_command(categories_group)
cli.add_command(backfill_group)
cli.add_command(user_group)
cli.add_command(token_group)
for _imap_command in (account_group, accounts_command, keys_group, sync_command):
    cli.add_command(_imap_command)
for _command in [*LABEL_COMMANDS, *WORKER_COMMANDS]:
    cli.add_command(_command)


def main() -> None:
    """Run the CLI; every error a user can cause ends as one line on stderr."""
    try:
        cli.main(prog_name="mailroom", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        click.echo("mailroom: interrupted.", err=True)
        sys.exit(130)
    except click.UsageError as exc:
        hint = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
        click.echo(f"mailroom: {exc.format_message()}{hint}", err=True)
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"mailroom: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except MailroomError as exc:
        click.echo(f"mailroom: {exc}", err=True)
        sys.exit(1)
