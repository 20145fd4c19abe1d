"""``mailroom account add local``: a file source as an account, with an outgoing server.

``mailroom import PATH`` creates a local account on its own; this command names
one ahead of the import, and gives it a way to send (``--smtp-*``): a Maildir a
local MTA delivers to, sent from through that machine's or a provider's SMTP server.
"""

from __future__ import annotations

from pathlib import Path

import click
from sqlalchemy import select

from mailroom.audit import record_account
from mailroom.cli.context import AppContext, pass_app, plain_errors
from mailroom.cli.smtp_options import (
    SmtpOptions,
    describe,
    resolve_outgoing,
    save_outgoing,
    smtp_options,
)
from mailroom.errors import ConfigError
from mailroom.labels.resolver import ensure_system_labels
from mailroom.owners import DEFAULT_OWNER, get_or_create_user
from mailroom.providers.local.propagator import PROVIDER
from mailroom.providers.local.source import open_source
from mailroom.store.models import Account

__all__ = ["add_local_command"]


@click.command("local")
@click.option("--name", required=True, help="A name for the account, unique per owner.")
@click.option(
    "--path",
    "source",
    required=True,
    type=click.Path(path_type=Path),
    help="The mbox file, Maildir or folder of .eml files.",
)
@smtp_options
@click.option("--owner", default=DEFAULT_OWNER, show_default=True, help="User owning the account.")
@pass_app
@plain_errors
def add_local_command(
    app: AppContext, name: str, source: Path, smtp: SmtpOptions, owner: str
) -> None:
    """Add a local account (nothing is imported yet)."""
    name = name.strip()
    if not name:
        raise ConfigError("The account needs a name (--name).")
    open_source(source)  # a path that is no mail source is refused now, not at the import
    password = smtp.password()
    outgoing = resolve_outgoing(smtp, current=None, password=password) if smtp.given else None
    with app.store.session() as session:
        user = get_or_create_user(session, owner)
        taken = session.scalar(
            select(Account.id).where(Account.user_id == user.id, Account.name == name)
        )
        if taken is not None:
            raise ConfigError(
                f"{owner!r} already has an account called {name!r}; choose another name."
            )
        account = Account(
            user_id=user.id,
            name=name,
            provider=PROVIDER,
            settings={"path": str(source.expanduser().resolve())},
        )
        session.add(account)
        session.flush()
        account_id = account.id
        ensure_system_labels(session, user.id)
        record_account(session, "account.add", account)
    if outgoing is not None:
        save_outgoing(app.store, app.settings, account_id, outgoing, password)
    sends = f"; it sends mail through {describe(outgoing)}" if outgoing else ""
    click.echo(
        f"Added the local account {name!r} for {source}{sends}; "
        f"`mailroom import {source} --account {name}` imports its mail."
    )
