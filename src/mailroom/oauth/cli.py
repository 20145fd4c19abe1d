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

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from mailroom.cli.context import AppContext, pass_app, plain_errors
from mailroom.oauth.connect import ConnectRequest, connect_account
from mailroom.oauth.endpoints import GOOGLE, OAuthEndpoints, microsoft
from mailroom.oauth.loopback import DEFAULT_WAIT
from mailroom.oauth.secretfile import read_client_secret
from mailroom.oauth.tokens import OAuthClient
from mailroom.owners import DEFAULT_OWNER

__all__ = ["ConnectOptions", "add_gmail_command", "add_microsoft_command", "connect_options"]

_OPTIONS = [
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


@dataclass(frozen=True, slots=True)
class ConnectOptions:
    """The options both commands share."""

    name: str
    address: str
    client_id: str
    wait: float
    reconnect: bool
    oauth_url: str | None
    owner: str

    def run(self, app: AppContext, endpoints: OAuthEndpoints, secret: str | None) -> None:
        """Sign the account in through the browser and store it; say what was done."""
        if self.oauth_url:
            endpoints = endpoints.at(self.oauth_url)
        client = OAuthClient(self.client_id.strip(), secret)
        request = ConnectRequest(
            endpoints, client, self.name, self.address, self.owner, self.reconnect, self.wait
        )
        connect_account(app.store, app.settings, request, announce=_announce)
        done = "Signed in again" if self.reconnect else "Connected"
        click.echo(
            f"{done}: the {_LABELS[endpoints.provider]} account {self.name.strip()!r} "
            f"({self.address.strip()}); its tokens are stored encrypted under the master key."
        )


_LABELS = {"gmail": "Gmail", "microsoft": "Microsoft"}


def connect_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add the shared options; the command receives them as ``connect: ConnectOptions``."""

    @functools.wraps(func)
    def wrapper(
        *args: Any,
        name: str,
        address: str,
        client_id: str,
        wait: float,
        reconnect: bool,
        oauth_url: str | None,
        owner: str,
        **kwargs: Any,
    ) -> Any:
        connect = ConnectOptions(name, address, client_id, wait, reconnect, oauth_url, owner)
        return func(*args, connect=connect, **kwargs)

    decorated: Callable[..., Any] = wrapper
    for option in reversed(_OPTIONS):
        decorated = option(decorated)
    return decorated


def _announce(url: str) -> None:
    click.echo("Open this address in a browser and allow mailroom access to the mailbox:")
    click.echo("")
    click.echo(f"  {url}")
    click.echo("")
    click.echo("Waiting for the browser...")


_SECRET_FILE = click.Path(dir_okay=False, path_type=Path)


@click.command("gmail")
@click.option(
    "--client-secret-file",
    type=_SECRET_FILE,
    required=True,
    help="The client's JSON file from the Google Cloud console, or a file with the secret.",
)
@connect_options
@pass_app
@plain_errors
def add_gmail_command(app: AppContext, client_secret_file: Path, connect: ConnectOptions) -> None:
    """Connect a Gmail account: sign in with Google in the browser (OAuth, PKCE)."""
    connect.run(app, GOOGLE, read_client_secret(client_secret_file, connect.client_id))


@click.command("microsoft")
@click.option(
    "--tenant",
    default="common",
    show_default=True,
    help="common, organizations, consumers, or a directory id or domain.",
)
@click.option(
    "--client-secret-file",
    type=_SECRET_FILE,
    default=None,
    help="Only for a confidential (web) client: a file with its secret.",
)
@connect_options
@pass_app
@plain_errors
def add_microsoft_command(
    app: AppContext, tenant: str, client_secret_file: Path | None, connect: ConnectOptions
) -> None:
    """Connect a Microsoft 365 or outlook.com account: sign in with Microsoft in the browser."""
    endpoints = microsoft(tenant)  # a bad tenant is refused before the secret is read
    secret = (
        read_client_secret(client_secret_file, connect.client_id) if client_secret_file else None
    )
    connect.run(app, endpoints, secret)
