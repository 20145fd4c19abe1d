"""Entry point: ``mailroom [--data-dir D] [--database-url U] COMMAND``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mailroom import __version__
from mailroom.cli.context import AppContext, setup_logging
from mailroom.cli.lazy import LazyGroup
from mailroom.errors import MailroomError

# Each command's module is imported only when that command runs (--help reads the
# summaries from the sources, cli/lazy.py): `mailroom list` must not pay for the web
# server, the job queues, IMAP or the cipher library, which together made every read
# command take most of a second.
# name -> "module:attribute"; the attribute is a click command or group.
COMMANDS: dict[str, str] = {
    "import": "mailroom.cli.imports:import_command",
    "list": "mailroom.cli.inspect:list_command",
    "search": "mailroom.cli.inspect:search_command",
    "show": "mailroom.cli.inspect:show_command",
    "explain": "mailroom.cli.inspect:explain_command",
    "serve": "mailroom.cli.serve:serve_command",
    "send": "mailroom.cli.send:send_command",
    "rules": "mailroom.cli.rules:rules_group",
    "categories": "mailroom.cli.categories:categories_group",
    "backfill": "mailroom.cli.backfill:backfill_group",
    "calendar": "mailroom.cli.calendar:calendar_group",
    "user": "mailroom.cli.users:user_group",
    "token": "mailroom.cli.users:token_group",
    "account": "mailroom.cli.accounts:account_group",
    "accounts": "mailroom.cli.accounts:accounts_command",
    "keys": "mailroom.cli.keys:keys_group",
    "sync": "mailroom.cli.sync:sync_command",
    "labels": "mailroom.cli.inspect:labels_command",
    "archive": "mailroom.cli.labels:archive_command",
    "trash": "mailroom.cli.labels:trash_command",
    "restore": "mailroom.cli.labels:restore_command",
    "inbox": "mailroom.cli.labels:inbox_command",
    "spam": "mailroom.cli.labels:spam_command",
    "star": "mailroom.cli.labels:star_command",
    "read": "mailroom.cli.labels:read_command",
    "label": "mailroom.cli.labels:label_command",
    "snooze": "mailroom.cli.labels:snooze_command",
    "wake": "mailroom.cli.labels:wake_command",
    "delete": "mailroom.cli.labels:delete_command",
    "worker": "mailroom.cli.workers:worker_command",
    "supervisor": "mailroom.cli.workers:supervisor_command",
    "outbound": "mailroom.cli.outbound:outbound_group",
    "gmail": "mailroom.cli.gmail:gmail_group",
    "webhooks": "mailroom.cli.webhooks:webhooks_group",
    "assistant": "mailroom.cli.assistant:assistant_group",
    "audit": "mailroom.cli.audit:audit_command",
    "backup": "mailroom.cli.backup:backup_group",
}

# Commands whose processes are the engine: the operator log is their audience. A
# foreground command prints its own one-sentence reason instead (said once, not twice).
ENGINE_COMMANDS = frozenset({"serve", "worker", "supervisor"})


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
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
    setup_logging(verbose, engine=ctx.invoked_subcommand in ENGINE_COMMANDS)
    ctx.obj = AppContext(data_dir=data_dir, database_url=database_url)
    ctx.call_on_close(ctx.obj.close)  # in-process callers (tests, scripts) keep no connections


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
