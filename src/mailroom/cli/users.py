"""``mailroom user add`` and ``mailroom token create|list|revoke``: who may sign in.

``user add NAME`` creates the user (or, for an existing one such as the
default ``me``, sets a new password); the password opens the web page and
JMAP (Basic). The password comes from a file or from standard input, never
from the command line, where other users of the machine could read it.
``token create USER [--expires 90d]`` prints a new API token once; only its
hash is kept. ``token list USER`` shows each token's id, name, creation,
last use (updated at most every 10 minutes) and expiry; ``token revoke ID``
deletes one, which stops it at once. ``user delete NAME --yes`` deletes a
user and everything theirs: their data key first, then every row
(:mod:`mailroom.crypto.shredding`).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import click

from mailroom.cli.context import (
    AppContext,
    pass_app,
    password_options,
    plain_errors,
    read_password,
)
from mailroom.errors import ConfigError

# The password hashing and token writes (jmap.auth, the ORM) are imported by the commands
# that change users or tokens; `token list` reads with plain SQL (mailroom.reading).

_DURATION = re.compile(r"(\d{1,5})\s*([hdw])")
_UNITS = {"h": "hours", "d": "days", "w": "weeks"}


@click.group("user")
def user_group() -> None:
    """Manage mailroom users (the people JMAP clients sign in as)."""


@user_group.command("add")
@click.argument("name")
@password_options
@pass_app
@plain_errors
def user_add_command(
    app: AppContext, name: str, password_file: Path | None, password_stdin: bool
) -> None:
    """Create user NAME with a password, or set the password of an existing user."""
    if not name.strip() or len(name) > 200 or ":" in name:
        raise ConfigError("A user name must be 1 to 200 characters without a colon.")
    from mailroom.jmap.auth import set_password

    password = read_password(password_file, password_stdin)
    with app.store.session() as session:
        created = set_password(session, name, password)
    click.echo(f"User {name} created." if created else f"Password of {name} set.")


@user_group.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Confirm: the user's mail is gone for good.")
@pass_app
@plain_errors
def user_delete_command(app: AppContext, name: str, yes: bool) -> None:
    """Delete user NAME with all their accounts, mail, labels and tokens (key first)."""
    if not yes:
        raise ConfigError(
            f"Deleting {name} destroys their key and all their mail for good; add --yes to confirm."
        )
    from mailroom.crypto.shredding import delete_owner

    deletion = delete_owner(app.existing_store, name)
    click.echo(
        f"User {name} deleted: data key destroyed, {deletion.messages} messages and "
        f"{sum(deletion.rows.values())} rows in all, {deletion.blobs} raw messages."
    )
    if deletion.wal_truncated is False:
        click.echo(
            "Another process was reading the database, so its write-ahead log still holds "
            "old pages; stop mailroom and run sqlite3 on the file with "
            "'PRAGMA wal_checkpoint(TRUNCATE)'.",
            err=True,
        )


@click.group("token")
def token_group() -> None:
    """Manage API tokens (bearer tokens for JMAP clients)."""


def parse_duration(text: str) -> timedelta:
    """``90d``, ``12h`` or ``2w`` as a timedelta; a ConfigError in plain words otherwise."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None or int(match.group(1)) == 0:
        raise ConfigError(
            f"--expires {text!r} is not a duration; give hours, days or weeks, "
            "such as 12h, 90d or 2w."
        )
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def _when(moment: datetime | None, never: str) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment is not None else never


@token_group.command("create")
@click.argument("user")
@click.option("--name", default="", help="A note saying what the token is for.")
@click.option(
    "--expires",
    default=None,
    metavar="DURATION",
    help="Stop working after this long: hours, days or weeks, e.g. 12h, 90d, 2w.",
)
@pass_app
@plain_errors
def token_create_command(app: AppContext, user: str, name: str, expires: str | None) -> None:
    """Create an API token for USER and print it (it is shown only this once)."""
    from mailroom.jmap.auth import create_token
    from mailroom.store.models import utcnow

    expires_at = utcnow() + parse_duration(expires) if expires is not None else None
    with app.store.session() as session:
        token = create_token(session, user, name, expires_at)
    click.echo(token)
    if expires_at is not None:
        click.echo(f"It expires on {_when(expires_at, '')} UTC.", err=True)


@token_group.command("list")
@click.argument("user")
@pass_app
@plain_errors
def token_list_command(app: AppContext, user: str) -> None:
    """List USER's API tokens: id, name, created, last used and expiry (UTC)."""
    from mailroom.reading import api_tokens, user_id

    now = datetime.now(UTC)
    reader = app.reader
    tokens = api_tokens(reader, user_id(reader, user))
    if not tokens:
        click.echo(f"{user} has no API tokens; `mailroom token create {user}` makes one.")
        return
    rows = [("ID", "NAME", "CREATED", "LAST USED", "EXPIRES")]
    for token in tokens:
        expires = _when(token["expires_at"], "never")
        if token["expires_at"] is not None and token["expires_at"] <= now:
            expires = f"expired {expires}"
        rows.append(
            (
                str(token["id"]),
                token["name"] or "-",
                _when(token["created_at"], ""),
                _when(token["last_used_at"], "never"),
                expires,
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        click.echo("  ".join([*cells, row[4]]))


@token_group.command("revoke")
@click.argument("token_id", metavar="ID", type=int)
@pass_app
@plain_errors
def token_revoke_command(app: AppContext, token_id: int) -> None:
    """Revoke API token ID (see `mailroom token list USER`); it stops working at once."""
    from mailroom.jmap.auth import revoke_token

    with app.store.session() as session:
        token = revoke_token(session, token_id)
        label = f" ({token.name})" if token.name else ""
    click.echo(f"Token {token_id}{label} revoked.")
