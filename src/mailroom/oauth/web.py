"""The web flow: connect a Gmail or Microsoft account from the accounts page.

The same authorization-code grant with PKCE as the command line
(:mod:`.flow`), with the web server itself as the redirect target:

1. :func:`start_web_flow` — the owner gave an account name and an address.
   Checked first (a master key, the address, the name free), then a PKCE
   verifier, a nonce and the redirect URI go into a *pending flow* sealed with
   the master key (:class:`~mailroom.secrets.SecretBox`, its own context) that
   the browser keeps as a short-lived HttpOnly cookie; the ``state`` is signed
   (:mod:`.state`) and bound to the provider, the client, the redirect URI,
   that nonce and the web session (its CSRF token), so an answer can complete
   only the flow this browser's own session started. The answer is the
   provider's authorization URL to redirect to, and the cookie's value.
2. :func:`finish_web_flow` — the provider sent the browser back with ``code``
   and ``state`` (or ``error``). The pending flow is opened, the state
   verified, the code exchanged with the verifier at the token endpoint
   (through the SSRF guard), and the account stored with its sealed tokens
   (:func:`.credentials.add_oauth_account`) — or, for a reconnect, the existing
   account's tokens replaced and the account made active again.

The operator registers one *web* client per provider (a Google "Web
application" client; a Microsoft app registration with a Web redirect URI)
with the redirect URI ``https://HOST/accounts/oauth/callback`` and configures
it (``MAILROOM_GOOGLE_CLIENT_ID`` ...; :func:`web_clients`). Every failure is a
:class:`~mailroom.errors.MailroomError` of one sentence (an answer that is not
this session's own flow: :class:`.state.StateError`).
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from sqlalchemy.orm import Session

from mailroom.audit import Origin
from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.oauth.credentials import (
    add_oauth_account,
    check_account_name,
    check_address,
    replace_tokens,
)
from mailroom.oauth.endpoints import GOOGLE, OAuthEndpoints, microsoft
from mailroom.oauth.flow import authorization_url
from mailroom.oauth.loopback import _refusal
from mailroom.oauth.pkce import new_pkce
from mailroom.oauth.secretfile import read_client_secret
from mailroom.oauth.state import StateError, StateSigner
from mailroom.oauth.tokens import OAuthClient, TokenEndpoint
from mailroom.owners import get_account
from mailroom.secrets import SecretBox, load_master_key
from mailroom.store.engine import Store
from mailroom.store.models import Account

__all__ = [
    "CALLBACK_PATH",
    "FLOW_SECONDS",
    "LABELS",
    "WebClient",
    "finish_web_flow",
    "own_account",
    "start_web_flow",
    "web_clients",
]

CALLBACK_PATH = "/accounts/oauth/callback"
FLOW_SECONDS = 600  # how long the owner has at the provider's sign-in page
LABELS = {"gmail": "Gmail", "microsoft": "Microsoft"}
_CONTEXT = "web-oauth-flow"


@dataclass(frozen=True, slots=True)
class WebClient:
    """One provider's configured web client: where to sign in, and as whom."""

    endpoints: OAuthEndpoints
    client_id: str
    secret_file: str | None

    @property
    def provider(self) -> str:
        """The ``Account.provider`` of the accounts it connects."""
        return self.endpoints.provider

    def client(self) -> OAuthClient:
        """The client with its secret, read from its file now (ConfigError if unreadable)."""
        secret = (
            read_client_secret(Path(self.secret_file), self.client_id) if self.secret_file else None
        )
        return OAuthClient(self.client_id, secret)


def web_clients(settings: Settings) -> dict[str, WebClient]:
    """The providers whose web client the operator configured (``gmail``, ``microsoft``)."""
    found: dict[str, WebClient] = {}
    if settings.google_client_id.strip():
        endpoints = GOOGLE.at(settings.google_oauth_url) if settings.google_oauth_url else GOOGLE
        found["gmail"] = WebClient(
            endpoints, settings.google_client_id.strip(), _path(settings.google_client_secret_file)
        )
    if settings.microsoft_client_id.strip():
        endpoints = microsoft(settings.microsoft_tenant)
        if settings.microsoft_oauth_url:
            endpoints = endpoints.at(settings.microsoft_oauth_url)
        found["microsoft"] = WebClient(
            endpoints,
            settings.microsoft_client_id.strip(),
            _path(settings.microsoft_client_secret_file),
        )
    return found


def _path(value: object) -> str | None:
    return str(value) if value else None


@dataclass(frozen=True, slots=True)
class _Pending:
    """What the browser carries, sealed, between the redirect and the callback."""

    provider: str
    name: str
    address: str
    verifier: str
    nonce: str
    redirect_uri: str
    reconnect: str  # "1": new tokens for the existing account ``name``

    def binding(self, client_id: str, session_key: str) -> str:
        """What the state is bound to (module docstring)."""
        return "\n".join(
            ("web", self.provider, client_id, self.redirect_uri, self.nonce, session_key)
        )


def start_web_flow(
    store: Store,
    settings: Settings,
    client: WebClient,
    *,
    owner: str,
    name: str,
    address: str,
    redirect_uri: str,
    session_key: str,
    reconnect: bool = False,
) -> tuple[str, str]:
    """Check the request and begin: (the provider's authorization URL, the cookie value).

    ``reconnect``: sign the owner's existing account ``name`` of this provider in
    again (the way out of ``auth_error``) instead of adding one.
    """
    master_key = load_master_key(settings)  # tokens are sealed with it: check before leaving
    address = check_address(address)
    if reconnect:
        name = own_account(store, owner, name, client.provider).name
    else:
        name = check_account_name(store, owner, name)
    client.client()  # an unreadable secret file is said now, not after the sign-in
    pkce = new_pkce()
    nonce = secrets.token_urlsafe(16)
    again = "1" if reconnect else ""
    pending = _Pending(client.provider, name, address, pkce.verifier, nonce, redirect_uri, again)
    state = StateSigner.from_master_key(master_key).issue(
        pending.binding(client.client_id, session_key), ttl=FLOW_SECONDS
    )
    sealed = SecretBox(master_key).seal(json.dumps(asdict(pending)).encode(), _CONTEXT)
    url = authorization_url(
        client.endpoints,
        client.client_id,
        redirect_uri=redirect_uri,
        state=state,
        code_challenge=pkce.challenge,
        login_hint=address,
    )
    return url, base64.urlsafe_b64encode(sealed).decode("ascii")


def finish_web_flow(
    store: Store,
    settings: Settings,
    clients: dict[str, WebClient],
    *,
    cookie: str | None,
    answer: dict[str, str],
    owner: str,
    session_key: str,
    origin: Origin | None = None,
) -> tuple[str, str]:
    """Complete the flow from the provider's answer; (provider, account name) connected."""
    master_key = load_master_key(settings)
    pending = _open(SecretBox(master_key), cookie)
    client = clients.get(pending.provider)
    if client is None:
        raise ConfigError(
            f"{LABELS.get(pending.provider, pending.provider)} accounts can no longer be "
            "connected here; ask the operator."
        )
    StateSigner.from_master_key(master_key).verify(
        answer.get("state", ""), pending.binding(client.client_id, session_key)
    )
    if answer.get("error"):
        raise _refusal(answer["error"][:100], answer.get("error_description", "")[:300])
    code = answer.get("code", "")
    if not code:
        raise StateError()
    oauth_client = client.client()
    tokens = TokenEndpoint(
        client.endpoints.token_url, oauth_client, allowed_hosts=settings.allowed_private_host_list
    ).exchange_code(code, pending.redirect_uri, pending.verifier)
    scopes = list(client.endpoints.scopes)
    if pending.reconnect:
        with store.session() as session:
            account = own_account(store, owner, pending.name, client.provider, session)
            replace_tokens(
                session,
                account,
                SecretBox(master_key),
                address=pending.address,
                client=oauth_client,
                token_url=client.endpoints.token_url,
                scopes=scopes,
                tokens=tokens,
            )
        return client.provider, pending.name
    add_oauth_account(
        store,
        settings,
        provider=client.provider,
        name=pending.name,
        address=pending.address,
        owner=owner,
        client=oauth_client,
        token_url=client.endpoints.token_url,
        scopes=scopes,
        tokens=tokens,
        origin=origin,
    )
    return client.provider, pending.name


def own_account(
    store: Store, owner: str, name: str, provider: str, session: Session | None = None
) -> Account:
    """The owner's account ``name`` of ``provider`` (NotFoundError / ConfigError otherwise)."""
    if session is None:
        with store.session() as own:
            account = own_account(store, owner, name, provider, own)
            own.expunge(account)
            return account
    account = get_account(session, owner, name.strip())
    if account.provider != provider:
        raise ConfigError(
            f"The account {account.name!r} is a {account.provider} account, not "
            f"{LABELS.get(provider, provider)}; sign it in again with its own button."
        )
    return account


def _open(box: SecretBox, cookie: str | None) -> _Pending:
    """The pending flow of the cookie; the one refusal for anything missing or altered."""
    if not cookie or len(cookie) > 4096:
        raise StateError()
    try:
        data = json.loads(box.open(base64.urlsafe_b64decode(cookie.encode("ascii")), _CONTEXT))
        return _Pending(**{item.name: str(data[item.name]) for item in fields(_Pending)})
    except (ConfigError, binascii.Error, ValueError, KeyError, TypeError, UnicodeError):
        raise StateError() from None
