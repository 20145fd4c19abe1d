"""``mailroom account add PROVIDER``, ``mailroom account disconnect`` and ``mailroom accounts``.

``mailroom accounts`` is a read command: it reads through ``mailroom.reading`` and
imports neither SQLAlchemy nor a provider (``tests/cli/test_read_path.py``), so the
other commands import those inside their functions.
"""

from __future__ import annotations

from typing import Any

import click

from mailroom.cli.context import AppContext, echo_json, pass_app, plain_errors
from mailroom.cli.table import Column, operator_width, print_table
from mailroom.config import DEFAULT_OWNER
from mailroom.reading import account_states, user_id


class _AccountCommands(click.Group):
    """``account update`` is built only when asked for: it imports the store and the key box."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), "update"])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name == "update":
            from mailroom.cli.account_update import update_command

            return update_command
        return super().get_command(ctx, cmd_name)


@click.group("account", cls=_AccountCommands)
def account_group() -> None:
    """Connect, change and disconnect mail accounts."""


class _ProviderCommands(click.Group):
    """``account add NAME``: one subcommand per registered provider that offers one.

    The commands come from the provider registry (``ProviderEntry.add_command``),
    built only when asked for, so this module names no provider.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        from mailroom.providers import registry

        return [name for name in registry.names() if _entry_command(name) is not None]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return _entry_command(cmd_name)


def _entry_command(name: str) -> click.Command | None:
    from mailroom.providers import registry

    entry = registry.find(name)
    if entry is None or entry.add_command is None:
        return None
    return entry.add_command()


@account_group.group("add", cls=_ProviderCommands)
def account_add_group() -> None:
    """Connect a new account (offline: the first sync checks the credentials)."""


@account_group.command("disconnect")
@click.argument("name")
@click.option("--owner", default=DEFAULT_OWNER, show_default=True, help="User owning the account.")
@pass_app
@plain_errors
def disconnect_command(app: AppContext, name: str, owner: str) -> None:
    """Stop syncing an account and forget its password; its mail stays (idempotent)."""
    from mailroom.owners import disconnect_account, get_account

    with app.existing_store.session() as session:
        disconnect_account(get_account(session, owner, name))
    click.echo(f"The account {name!r} is disconnected; its mail stays in the store.")


def _progress(importing: bool, done: int, total: int) -> str:
    if not importing:
        return "done"
    if not total and not done:
        # No folder has been counted yet: the first sync has not reached the server.
        return "not started"
    percent = min(100.0, 100.0 * done / total) if total else 0.0
    return f"{min(done, total)}/{total} ({percent:.0f}%)"


def _backoff_seconds(watch_state: str) -> float | None:
    kind, _, millis = watch_state.partition(":")
    if kind != "backoff":
        return None
    try:
        return int(millis) / 1000
    except ValueError:
        return None


def account_reason(status: str, reason: str | None, watch_state: str) -> str:
    """What is wrong with an account, in words, with when it is tried again; "" if nothing."""
    delay = _backoff_seconds(watch_state)
    if delay is None or status != "active":
        return reason or ""
    return f"{reason or 'the live connection ended'}; retrying in {delay:.0f} s"


def account_status(status: str, watch_state: str) -> str:
    """The status column: the account's status, and whether its live push runs."""
    if status == "active" and watch_state == "watching":
        return "active, watching"
    return status


def outgoing_server(settings: dict[str, Any]) -> str | None:
    """``host:port`` of the account's outgoing server (``account update --smtp-host``), or None."""
    smtp = settings.get("smtp")
    if not isinstance(smtp, dict) or not smtp.get("host"):
        return None
    return f"{smtp['host']}:{smtp['port']}" if smtp.get("port") else str(smtp["host"])


# The table must fit a 100-column terminal; the reason column wraps instead.
TABLE_WIDTH = 100


@click.command("accounts")
@click.option("--owner", default=None, help="Only this user's accounts.")
@click.option(
    "--format",
    "output",
    type=click.Choice(["table", "jsonl"]),
    default="table",
    show_default=True,
)
@pass_app
@plain_errors
def accounts_command(app: AppContext, owner: str | None, output: str) -> None:
    """List accounts: status, import progress and, when something is wrong, why."""
    reader = app.reader
    rows = [
        {
            "owner": account["owner"],
            "name": account["name"],
            "provider": account["provider"],
            "status": account["status"],
            "status_reason": account["status_reason"],
            "watch_state": account["watch_state"],
            "reason": account_reason(
                account["status"], account["status_reason"], account["watch_state"]
            ),
            "importing": account["importing"],
            "import_done": account["import_done"],
            "import_total": account["import_total"],
            "progress": _progress(
                account["importing"], account["import_done"], account["import_total"]
            ),
            "outgoing": outgoing_server(account["settings"]),
        }
        for account in account_states(reader, None if owner is None else user_id(reader, owner))
    ]
    if output == "jsonl":
        for row in rows:
            echo_json(row)
        return
    if not rows:
        click.echo("No accounts yet; add one with `mailroom account add imap`.")
        return
    headers = ("owner", "account", "provider", "status", "import", "outgoing", "reason")
    print_table(
        [Column(header) for header in headers],
        [
            (
                row["owner"],
                row["name"],
                row["provider"],
                account_status(row["status"], row["watch_state"]),
                row["progress"],
                row["outgoing"] or "-",
                row["reason"] or "-",
            )
            for row in rows
        ],
        operator_width(TABLE_WIDTH),
    )
