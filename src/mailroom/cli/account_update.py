"""``mailroom account update NAME``: change an account's outgoing server (``--smtp-*``)."""

from __future__ import annotations

import click

from mailroom.cli.context import AppContext, pass_app, plain_errors
from mailroom.cli.smtp_options import SmtpOptions, describe, resolve_outgoing, smtp_options
from mailroom.config import DEFAULT_OWNER
from mailroom.errors import ConfigError
from mailroom.outbound.smtp_settings import (
    can_log_in,
    clear_smtp,
    incoming_login,
    set_smtp,
    smtp_settings,
)
from mailroom.owners import get_account

__all__ = ["update_command"]


@click.command("update")
@click.argument("name")
@click.option("--owner", default=DEFAULT_OWNER, show_default=True, help="User owning the account.")
@smtp_options
@click.option("--no-smtp", is_flag=True, help="Forget the outgoing server and its password.")
@pass_app
@plain_errors
def update_command(
    app: AppContext, name: str, owner: str, smtp: SmtpOptions, no_smtp: bool
) -> None:
    """Set or change the account's outgoing server; options not given stay as they are."""
    if no_smtp and smtp.given:
        raise ConfigError("Give either --no-smtp or --smtp-* options, not both.")
    if not no_smtp and not smtp.given:
        raise ConfigError("Nothing to change; give --smtp-host and the other --smtp-* options.")
    password = smtp.password()
    with app.existing_store.session() as session:
        account = get_account(session, owner, name)
        if no_smtp:
            clear_smtp(account)
            click.echo(f"The account {name!r} has no outgoing server now.")
            return
        try:
            current = smtp_settings(account)
        except ConfigError:  # damaged settings: these options replace them
            current = None
        config = resolve_outgoing(
            smtp,
            current=current,
            password=password,
            default_login=incoming_login(account),
            can_log_in=can_log_in(account),
        )
        set_smtp(account, config, password, app.settings)
    click.echo(f"The account {name!r} sends mail through {describe(config)}.")
