"""``mailroom account add imap``: the IMAP provider's command, offered through the registry."""

from __future__ import annotations

from pathlib import Path

import click

from mailroom.cli.context import (
    AppContext,
    pass_app,
    password_options,
    plain_errors,
    read_password,
)
from mailroom.cli.smtp_options import (
    SmtpOptions,
    describe,
    resolve_outgoing,
    save_outgoing,
    smtp_options,
)
from mailroom.owners import DEFAULT_OWNER
from mailroom.providers.imap.account import TLS_MODES, add_imap_account

__all__ = ["add_imap_command"]


@click.command("imap")
@click.option("--name", required=True, help="A name for the account, unique per owner.")
@click.option("--host", required=True, help="The IMAP server, e.g. imap.example.org.")
@click.option("--port", type=int, default=None, help="Default 993 for ssl, 143 otherwise.")
@click.option(
    "--tls",
    type=click.Choice(TLS_MODES),
    default="ssl",
    show_default=True,
    help="Implicit TLS, STARTTLS, or none (trusted networks only).",
)
@click.option("--login", required=True, help="The user name to log in with.")
@password_options
@smtp_options
@click.option("--owner", default=DEFAULT_OWNER, show_default=True, help="User owning the account.")
@pass_app
@plain_errors
def add_imap_command(
    app: AppContext,
    name: str,
    host: str,
    port: int | None,
    tls: str,
    login: str,
    password_file: Path | None,
    password_stdin: bool,
    smtp: SmtpOptions,
    owner: str,
) -> None:
    """Add an IMAP account; the passwords are stored encrypted under the master key.

    With ``--smtp-host`` it sends mail through that server, logging in with the
    IMAP login and password unless ``--smtp-login`` / ``--smtp-password-*`` differ.
    """
    password = read_password(password_file, password_stdin)
    smtp_password = smtp.password(stdin_taken=password_stdin)
    outgoing = (
        resolve_outgoing(
            smtp, current=None, password=smtp_password, default_login=login, can_log_in=True
        )
        if smtp.given
        else None
    )
    account_id = add_imap_account(
        app.store,
        app.settings,
        name=name,
        host=host,
        port=port,
        tls=tls,
        login=login,
        password=password,
        owner=owner,
    )
    if outgoing is not None:
        save_outgoing(app.store, app.settings, account_id, outgoing, smtp_password)
    sends = f"; it sends mail through {describe(outgoing)}" if outgoing else ""
    click.echo(
        f"Added the IMAP account {name!r} ({login} at {host}){sends}; "
        f"`mailroom sync {name}` checks the login and fetches mail."
    )
