"""An OAuth account's stored credentials: what is plain, what is sealed.

``Account.settings`` (plain JSON) holds what is not secret::

    {"address": "ann@example.org",
     "oauth": {"client_id": "...", "token_url": "https://oauth2.googleapis.com/token",
               "scopes": ["..."]}}

``Account.secret`` holds, sealed by :class:`mailroom.secrets.SecretBox` and bound to
``account:<id>`` like an IMAP password, the JSON of the token set and the client
secret (when the client has one)::

    {"tokens": {"access_token", "refresh_token", "expires_at", ...}, "client_secret": ...}

So nothing that lets anyone act as the owner is readable in the database file
without the master key. Connecting is one transaction: the row, its sealed
tokens and the owner's system labels.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.audit import Origin, record_account
from mailroom.config import Settings
from mailroom.errors import ConfigError, NotFoundError
from mailroom.labels.resolver import ensure_system_labels
from mailroom.oauth.tokens import OAuthClient, TokenSet
from mailroom.owners import get_account, get_or_create_user
from mailroom.secrets import SecretBox
from mailroom.store.engine import Store
from mailroom.store.models import Account

__all__ = [
    "OAuthCredentials",
    "add_oauth_account",
    "check_account_name",
    "check_address",
    "load_credentials",
    "replace_tokens",
    "save_tokens",
]


@dataclass(frozen=True, slots=True)
class OAuthCredentials:
    """Everything needed to get an access token for one account."""

    client: OAuthClient
    token_url: str
    tokens: TokenSet


def _context(account_id: int) -> str:
    return f"account:{account_id}"


def _seal(box: SecretBox, account_id: int, client: OAuthClient, tokens: TokenSet) -> bytes:
    record = {"tokens": tokens.as_json(), "client_secret": client.client_secret}
    return box.seal(json.dumps(record).encode("utf-8"), _context(account_id))


def _settings(
    address: str, client: OAuthClient, token_url: str, scopes: list[str]
) -> dict[str, Any]:
    return {
        "address": address,
        "oauth": {"client_id": client.client_id, "token_url": token_url, "scopes": scopes},
    }


def _name_taken(owner: str, name: str) -> ConfigError:
    return ConfigError(f"{owner!r} already has an account called {name!r}; choose another name.")


def check_account_name(store: Store, owner: str, name: str) -> str:
    """The stripped name, or ConfigError when it is empty or the owner already uses it."""
    name = name.strip()
    if not name:
        raise ConfigError("The account needs a name (--name).")
    with store.session() as session:
        try:
            get_account(session, owner, name)
        except NotFoundError:
            return name
    raise _name_taken(owner, name)


def check_address(address: str) -> str:
    """The address, stripped, or ConfigError when it is not ``local@domain``."""
    address = address.strip()
    local, at, domain = address.rpartition("@")
    if not at or not local or "." not in domain or any(ch.isspace() for ch in address):
        raise ConfigError(f"{address!r} is not a mail address; give one such as ann@example.org.")
    return address


def add_oauth_account(
    store: Store,
    settings: Settings,
    *,
    provider: str,
    name: str,
    address: str,
    owner: str,
    client: OAuthClient,
    token_url: str,
    scopes: list[str],
    tokens: TokenSet,
    origin: Origin | None = None,
) -> int:
    """Store a new, active account with its sealed tokens; returns its id (audited)."""
    box = SecretBox.from_settings(settings)
    name = name.strip()
    with store.session() as session:
        user = get_or_create_user(session, owner)
        taken = session.scalar(
            select(Account.id).where(Account.user_id == user.id, Account.name == name)
        )
        if taken is not None:  # added meanwhile, while the owner was in the browser
            raise _name_taken(owner, name)
        account = Account(
            user_id=user.id,
            name=name,
            provider=provider,
            settings=_settings(check_address(address), client, token_url, scopes),
            status="active",
            watch_state="idle",
        )
        session.add(account)
        session.flush()
        account.secret = _seal(box, account.id, client, tokens)
        ensure_system_labels(session, user.id)
        record_account(session, "account.add", account, origin)
        return account.id


def load_credentials(account: Account, box: SecretBox) -> OAuthCredentials:
    """Open the account's sealed credentials; ConfigError when they are missing or damaged."""
    oauth = (account.settings or {}).get("oauth")
    if not account.secret or not isinstance(oauth, dict):
        raise ConfigError(f"The account {account.name!r} has no stored sign-in; connect it again.")
    record = json.loads(box.open(account.secret, _context(account.id)))
    try:
        client = OAuthClient(str(oauth["client_id"]), record.get("client_secret"))
        return OAuthCredentials(
            client, str(oauth["token_url"]), TokenSet.from_json(record["tokens"])
        )
    except (KeyError, TypeError, ValueError):
        raise ConfigError(
            f"The stored sign-in of the account {account.name!r} is damaged; connect it again."
        ) from None


def save_tokens(account: Account, box: SecretBox, credentials: OAuthCredentials) -> None:
    """Seal ``credentials`` onto the account row (the caller's transaction commits it)."""
    account.secret = _seal(box, account.id, credentials.client, credentials.tokens)


def replace_tokens(
    session: Session,
    account: Account,
    box: SecretBox,
    *,
    address: str,
    client: OAuthClient,
    token_url: str,
    scopes: list[str],
    tokens: TokenSet,
) -> None:
    """A reconnect: new address, client, tokens and scopes on an account, active again."""
    account.settings = {**(account.settings or {}), **_settings(address, client, token_url, scopes)}
    account.secret = _seal(box, account.id, client, tokens)
    account.status = "active"
    account.status_reason = None
    session.flush()
