"""``mailroom user add`` and ``mailroom token create``: who may use JMAP.

``user add NAME`` creates the user (or, for an existing one such as the
default ``me``, sets a new password). The password comes from a file or
from standard input, never from the command line, where other users of the
machine could read it. ``token create USER`` prints a new API token once;
only its hash is kept.
"""

from __future__ import annotations

from pathlib import Path

import click

from mailroom.cli.context import AppContext, pass_app, plain_errors, read_password
from mailroom.errors import ConfigError
from mailroom.jmap.auth import create_token, set_password


@click.group("user")
def user_group() -> None:
    """Manage mailroom users (the people JMAP clients sign in as)."""


@user_group.command("add")
@click.argument("name")
@click.option(
    "--password-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the password from the first line of this file.",
)
@click.option("--password-stdin", is_flag=True, help="Read the password from standard input.")
@pass_app
@plain_errors
def user_add_command(
    app: AppContext, name: str, password_file: Path | None, password_stdin: bool
) -> None:
    """Create user NAME with a password, or set the password of an existing user."""
    if not name.strip() or len(name) > 200 or ":" in name:
        raise ConfigError("A user name must be 1 to 200 characters without a colon.")
    password = read_password(password_file, password_stdin)
    with app.store.session() as session:
        created = set_password(session, name, password)
    click.echo(f"User {name} created." if created else f"Password of {name} set.")


@click.group("token")
def token_group() -> None:
    """Manage API tokens (bearer tokens for JMAP clients)."""


@token_group.command("create")
@click.argument("user")
@click.option("--name", default="", help="A note saying what the token is for.")
@pass_app
@plain_errors
def token_create_command(app: AppContext, user: str, name: str) -> None:
    """Create an API token for USER and print it (it is shown only this once)."""
    with app.store.session() as session:
        token = create_token(session, user, name)
    click.echo(token)
