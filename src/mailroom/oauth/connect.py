"""Connecting (or reconnecting) an OAuth account: checks first, then the browser, then the row.

Everything that can fail without the browser is checked before the owner is
sent to sign in: the master key (tokens are sealed with it, the state is
signed with a key derived from it), the account name (free for a new account;
an existing account of the same provider for ``reconnect``) and the address.
Then :func:`.flow.run_installed_app_flow` runs, and the account is stored —
active, with its sealed tokens — in one transaction. A reconnect replaces the
client and tokens of the account and makes it active again (the way out of
``auth_error``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.oauth.credentials import (
    add_oauth_account,
    check_account_name,
    check_address,
    replace_tokens,
)
from mailroom.oauth.endpoints import OAuthEndpoints
from mailroom.oauth.flow import run_installed_app_flow
from mailroom.oauth.state import StateSigner
from mailroom.oauth.tokens import OAuthClient
from mailroom.owners import get_account
from mailroom.secrets import SecretBox, load_master_key
from mailroom.store.engine import Store

__all__ = ["ConnectRequest", "connect_account"]


@dataclass(frozen=True, slots=True)
class ConnectRequest:
    """What the owner asked for: which account, which client, how long to wait."""

    endpoints: OAuthEndpoints
    client: OAuthClient
    name: str
    address: str
    owner: str
    reconnect: bool = False
    wait: float = 300.0


def _check_reconnect(store: Store, request: ConnectRequest) -> str:
    name = request.name.strip()
    with store.session() as session:
        account = get_account(session, request.owner, name)
        if account.provider != request.endpoints.provider:
            raise ConfigError(
                f"The account {name!r} is a {account.provider} account, not "
                f"{request.endpoints.provider}; reconnect it with its own command."
            )
    return name


def connect_account(
    store: Store,
    settings: Settings,
    request: ConnectRequest,
    *,
    announce: Callable[[str], None],
) -> int:
    """Run the browser sign-in and store the account (or its new tokens); the account id."""
    if not request.client.client_id.strip():
        raise ConfigError("The client id is empty; give the one from the provider's console.")
    master_key = load_master_key(settings)  # before the browser: tokens need it
    address = check_address(request.address)
    if request.reconnect:
        name = _check_reconnect(store, request)
    else:
        name = check_account_name(store, request.owner, request.name)
    tokens = run_installed_app_flow(
        request.endpoints,
        request.client,
        signer=StateSigner.from_master_key(master_key),
        announce=announce,
        allowed_hosts=settings.allowed_private_host_list,
        wait=request.wait,
        login_hint=address,
    )
    scopes = list(request.endpoints.scopes)
    if not request.reconnect:
        return add_oauth_account(
            store,
            settings,
            provider=request.endpoints.provider,
            name=name,
            address=address,
            owner=request.owner,
            client=request.client,
            token_url=request.endpoints.token_url,
            scopes=scopes,
            tokens=tokens,
        )
    with store.session() as session:
        account = get_account(session, request.owner, name)
        replace_tokens(
            session,
            account,
            SecretBox(master_key),
            address=address,
            client=request.client,
            token_url=request.endpoints.token_url,
            scopes=scopes,
            tokens=tokens,
        )
        return account.id
