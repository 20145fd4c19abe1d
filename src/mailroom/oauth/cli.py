"""``mailroom account add gmail`` and ``mailroom account add microsoft``: the browser sign-in.

Both print the authorization URL, wait for the browser to come back to the
loopback listener, and store the account with its tokens sealed. The client
secret is read from a file (``--client-secret-file``), never taken on the
command line. ``--reconnect`` signs an existing account in again (after
``auth_error``). ``--oauth-url`` points the commands at another authorization
server with the same paths (an emulator); Microsoft's national clouds are
reached the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar

import click

from mailroom.cli.context import AppContext, pass_app, plain_errors
from mailroom.oauth.connect import ConnectRequest, connect_account
from mailroom.oauth.endpoints import GOOGLE, OAuthEndpoints, microsoft
from mailroom.oauth.loopback import DEFAULT_WAIT
from mailroom.oauth.secretfile import read_client_secret
from mailroom.oauth.tokens import OAuthClient
from mailroom.owners import DEFAULT_OWNER

__all__ = ["add_gmail_command", "add_microsoft_command"]

P = ParamSpec("P")
R = TypeVar("R")


def _connect_options(func: Callable[P, R]) -> Callable[P, R]:
    """The options both commands share."""
    options = [
        click.option("--name", required=True, help="A name for the account, unique per owner."),
        click.option("--address", required=True, help="The account's mail address."),
        click.option("--client-id", required=True, help="The OAuth client id from the console."),
        click.option(
            "--wait",
            type=click.FloatRange(min=1),
            default=DEFAULT_WAIT,
            show_default=True,
            help="Seconds to wait for the browser.",
        ),
        click.option(
            "--reconnect", is_flag=True, help="Sign an existing account in again (auth_error)."
        ),
        click.option(
            "--oauth-url",
            default=None,
            help="Another authorization server with the same paths (an emulator).",
        ),
        click.option(
            "--owner", default=DEFAULT_OWNER, show_default=True, help="User owning the account."
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _announce(url: str) -> None:
    click.echo("Open this address in a browser and allow mailroom access to the mailbox:")
    click.echo("")
    click.echo(f"  {url}")
    click.echo("")
    click.echo("Waiting for the browser...")


def _connect(
    app: AppContext,
    endpoints: OAuthEndpoints,
    client: OAuthClient,
    *,
    name: str,
    address: str,
    wait: float,
    reconnect: bool,
    oauth_url: str | None,
    owner: str,
    label: str,
) -> None:
    if oauth_url:
        endpoints = endpoints.at(oauth_url)
    request = ConnectRequest(endpoints, client, name, address, owner, reconnect, wait)
    connect_account(app.store, app.settings, request, announce=_announce)
    done = "Signed in again" if reconnect else "Connected"
    click.echo(
        f"{done}: the {label} account {name.strip()!r} ({address.strip()}); its tokens are "
        "stored encrypted under the master key."
    )


@click.command("gmail")
@click.option(
    "--client-secret-file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="The client's JSON file from the Google Cloud console, or a file with the secret.",
)
@_connect_options
@pass_app
@plain_errors
def add_gmail_command(
    app: AppContext,
    client_secret_file: Path,
    name: str,
    address: str,
    client_id: str,
    wait: float,
    reconnect: bool,
    oauth_url: str | None,
    owner: str,
) -> None:
    """Connect a Gmail account: sign in with Google in the browser (OAuth, PKCE)."""
    client = OAuthClient(client_id.strip(), read_client_secret(client_secret_file, client_id))
    _connect(
        app,
        GOOGLE,
        client,
        name=name,
        address=address,
        wait=wait,
        reconnect=reconnect,
        oauth_url=oauth_url,
        owner=owner,
        label="Gmail",
    )


@click.command("microsoft")
@click.option(
    "--tenant",
    default="common",
    show_default=True,
    help="common, organizations, consumers, or a directory id or domain.",
)
@click.option(
    "--client-secret-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Only for a confidential (web) client: a file with its secret.",
)
@_connect_options
@pass_app
@plain_errors
def add_microsoft_command(
    app: AppContext,
    tenant: str,
    client_secret_file: Path | None,
    name: str,
    address: str,
    client_id: str,
    wait: float,
    reconnect: bool,
    oauth_url: str | None,
    owner: str,
) -> None:
    """Connect a Microsoft 365 or outlook.com account: sign in with Microsoft in the browser."""
    endpoints = microsoft(tenant)  # a bad tenant is refused before the secret is read
    secret = read_client_secret(client_secret_file, client_id) if client_secret_file else None
    _connect(
        app,
        endpoints,
        OAuthClient(client_id.strip(), secret),
        name=name,
        address=address,
        wait=wait,
        reconnect=reconnect,
        oauth_url=oauth_url,
        owner=owner,
        label="Microsoft",
    )
