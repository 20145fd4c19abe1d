"""TokenSource on both stores: refresh on expiry and on a 401, rotation persisted, auth_error."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import text, update

from mailroom.config import SecretStr, Settings
from mailroom.errors import ConfigError, ProviderError
from mailroom.oauth.connect import ConnectRequest, connect_account
from mailroom.oauth.endpoints import GOOGLE, microsoft
from mailroom.oauth.source import TokenSource
from mailroom.oauth.tokens import OAuthClient
from mailroom.providers.base import AuthError, TransientError
from mailroom.providers.errors import account_outcome
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.oauth.accounts import connect
from tests.oauth.conftest import PUBLIC_CLIENT_ID
from tests.oauth.server import AuthServer


class Clock:
    """Real time, moved forward by the test."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def _account(store: Store, account_id: int) -> Account:
    with store.session() as session:
        account = session.get(Account, account_id)
        assert account is not None
        session.expunge(account)
        return account


def test_connect_stores_an_active_account_with_sealed_tokens(
    store: Store, settings: Settings, auth_server: AuthServer, tmp_path: Path
) -> None:
    """The account row is active with its address; no token is readable in the database."""
    account_id = connect(store, settings, auth_server)
    account = _account(store, account_id)
    assert (account.provider, account.status, account.name) == ("gmail", "active", "work")
    assert account.settings["address"] == "ann@example.org"
    assert account.settings["oauth"]["client_id"] == "desktop-client.apps.example"
    (access,) = auth_server.access_tokens
    (refresh,) = auth_server.refresh_tokens
    secrets = [access, refresh, "desktop-secret-Xq7"]
    with store.engine.connect() as conn:
        rows = conn.execute(text("SELECT * FROM accounts")).all()
    dumped = repr(rows)
    assert all(secret not in dumped for secret in secrets)
    if store.engine.url.get_backend_name() == "sqlite":
        store.dispose()  # everything written to the file and its log
        database = Path(str(store.engine.url.database))
        for path in (database, Path(f"{database}-wal")):
            if path.exists():
                raw = path.read_bytes()
                assert all(secret.encode() not in raw for secret in secrets)
    assert TokenSource(store, account_id, settings).access_token() == access
    again = ConnectRequest(
        GOOGLE.at(auth_server.url), OAuthClient("x"), " work ", "a@b.example", "me"
    )
    with pytest.raises(ConfigError, match="'me' already has an account called 'work'"):
        connect_account(store, settings, again, announce=pytest.fail)


def test_an_expired_token_is_refreshed_once_and_kept(
    store: Store, settings: Settings, auth_server: AuthServer
) -> None:
    """Within its lifetime the token is reused; once (nearly) expired it is refreshed."""
    account_id = connect(store, settings, auth_server)
    clock = Clock()
    source = TokenSource(store, account_id, settings, clock=clock)
    first = source()
    assert source.access_token() == first and auth_server.grants("refresh_token") == []
    clock.offset = auth_server.access_ttl - 30  # inside the 60 s margin
    second = source.access_token()
    assert second != first and auth_server.accepts(second)
    assert len(auth_server.grants("refresh_token")) == 1
    assert source.access_token() == second
    # A new source (another process) reads the refreshed token from the store.
    assert TokenSource(store, account_id, settings, clock=clock).access_token() == second
    assert len(auth_server.grants("refresh_token")) == 1


def test_a_rejected_token_is_refreshed_and_other_workers_use_the_new_one(
    store: Store, settings: Settings, auth_server: AuthServer
) -> None:
    """After a 401 the source refreshes; a second worker told the same finds the new token."""
    account_id = connect(store, settings, auth_server)
    one = TokenSource(store, account_id, settings)
    two = TokenSource(store, account_id, settings)
    old = one.access_token()
    assert two.access_token() == old
    auth_server.expire_access_tokens()  # the provider now answers 401 for it
    assert not auth_server.accepts(old)
    fresh = one.rejected(old)
    assert fresh != old and auth_server.accepts(fresh)
    assert two.rejected(old) == fresh  # found in the store, no second refresh
    assert one.rejected(old) == fresh  # a late 401 for the old token changes nothing
    assert two(old) == two() == fresh  # the callable form says the same
    assert len(auth_server.grants("refresh_token")) == 1


def test_rotated_refresh_tokens_are_persisted(
    store: Store, settings: Settings, auth_server: AuthServer
) -> None:
    """Microsoft-style rotation: each refresh's new refresh token replaces the revoked one."""
    auth_server.rotate = True
    account_id = connect(
        store,
        settings,
        auth_server,
        endpoints=microsoft("common"),
        client=OAuthClient(PUBLIC_CLIENT_ID),
    )
    for _ in range(3):
        # A fresh source each time: only what was stored can make the next refresh work.
        source = TokenSource(store, account_id, settings)
        token = source.access_token()
        assert source.rejected(token) != token
    assert len(auth_server.refresh_tokens) == 1  # every earlier one was revoked
    sent = [form["refresh_token"] for form in auth_server.grants("refresh_token")]
    assert len(set(sent)) == 3  # never the same (revoked) refresh token twice
    assert _account(store, account_id).status == "active"


def test_a_revoked_grant_turns_the_account_to_auth_error(
    store: Store, settings: Settings, auth_server: AuthServer
) -> None:
    """invalid_grant on refresh is an AuthError; the account's status becomes auth_error."""
    account_id = connect(store, settings, auth_server)
    source = TokenSource(store, account_id, settings)
    token = source.access_token()
    auth_server.revoke_refresh_tokens()
    with pytest.raises(AuthError, match="connect the account again") as refused:
        source.rejected(token)
    assert account_outcome(refused.value).status == "auth_error"
    account = _account(store, account_id)
    assert (account.status, account.status_reason) == ("auth_error", "invalid_grant")
    # Reconnecting through the browser makes it active again, with new tokens.
    assert connect(store, settings, auth_server, reconnect=True) == account_id
    account = _account(store, account_id)
    assert (account.status, account.status_reason) == ("active", None)
    assert auth_server.accepts(TokenSource(store, account_id, settings).access_token())


def test_a_busy_server_leaves_the_status_and_tokens_alone(
    store: Store, settings: Settings, auth_server: AuthServer
) -> None:
    """A 503 on refresh is a TransientError: the account stays active, the next try works."""
    account_id = connect(store, settings, auth_server)
    source = TokenSource(store, account_id, settings)
    token = source.access_token()
    auth_server.fail_next.append(503)
    with pytest.raises(TransientError):
        source.rejected(token)
    assert _account(store, account_id).status == "active"
    assert auth_server.accepts(source.rejected(token))


def test_a_wrong_master_key_or_a_disconnected_account_is_refused(
    store: Store, settings: Settings, auth_server: AuthServer
) -> None:
    """Tokens sealed under one key do not open under another; a disconnected account is left."""
    account_id = connect(store, settings, auth_server)
    other = Settings(
        master_key=SecretStr("A" * 43 + "="),
        allowed_private_hosts="127.0.0.1",
        data_dir=settings.data_dir,
    )
    with pytest.raises(ConfigError, match="cannot be decrypted"):
        TokenSource(store, account_id, other).access_token()
    with store.session() as session:
        session.execute(
            update(Account).where(Account.id == account_id).values(status="disconnected")
        )
    with pytest.raises(ProviderError, match="is disconnected"):
        TokenSource(store, account_id, settings).access_token()
