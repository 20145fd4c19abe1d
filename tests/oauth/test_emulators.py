"""The connect flow and TokenSource against the Gmail and Graph emulators' OAuth endpoints.

The emulators follow Google's and Microsoft's documented token endpoints (their
own helpers' work); connecting through them and calling the mail API with the
token shows the flow, the stored tokens and the refresh work with those
contracts, not only with this package's own test server.
"""

from __future__ import annotations

import httpx
import pytest

from mailroom.config import Settings
from mailroom.oauth.connect import ConnectRequest, connect_account
from mailroom.oauth.endpoints import GOOGLE, OAuthEndpoints, microsoft
from mailroom.oauth.source import TokenSource
from mailroom.oauth.tokens import OAuthClient
from mailroom.providers.base import AuthError
from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.emulators.gmail.emulator import GmailEmulator
from tests.emulators.gmail.fixtures import gmail_emulator
from tests.emulators.gmail.oauth import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET
from tests.emulators.graph.fixture import graph_emulator
from tests.emulators.graph.server import GraphEmulator
from tests.oauth.browser import Background, open_in_browser

__all__ = ["gmail_emulator", "graph_emulator"]


def _connect(
    store: Store, settings: Settings, endpoints: OAuthEndpoints, client: OAuthClient, address: str
) -> int:
    request = ConnectRequest(endpoints, client, "work", address, "me", wait=20)
    flow = Background(lambda announce: connect_account(store, settings, request, announce=announce))
    open_in_browser(flow.url())
    return flow.result()


def _status(url: str, token: str) -> int:
    return httpx.get(url, headers={"Authorization": f"Bearer {token}"}).status_code


def test_gmail_emulator_accepts_the_tokens_and_their_refresh(
    store: Store, settings: Settings, gmail_emulator: GmailEmulator
) -> None:
    """Connected through the emulator, the token reads the profile; after a 401 it refreshes."""
    account_id = _connect(
        store,
        settings,
        GOOGLE.at(gmail_emulator.url),
        OAuthClient(DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET),
        "ann@gmail.example",
    )
    profile = f"{gmail_emulator.url}/gmail/v1/users/me/profile"
    source = TokenSource(store, account_id, settings)
    token = source.access_token()
    assert _status(profile, token) == 200
    gmail_emulator.expire_tokens()
    assert _status(profile, token) == 401
    fresh = source.rejected(token)
    assert _status(profile, fresh) == 200
    gmail_emulator.revoke_refresh_tokens()
    gmail_emulator.expire_tokens()
    with pytest.raises(AuthError):
        source.rejected(fresh)
    with store.session() as session:
        account = session.get(Account, account_id)
        assert account is not None and account.status == "auth_error"


def test_graph_emulator_rotates_and_the_stored_refresh_token_follows(
    store: Store, settings: Settings, graph_emulator: GraphEmulator
) -> None:
    """Each refresh at the Graph emulator rotates the refresh token; the stored one keeps up."""
    account_id = _connect(
        store,
        settings,
        microsoft("common").at(graph_emulator.base_url),
        OAuthClient("mailroom-test"),
        graph_emulator.default_address,
    )
    folders = f"{graph_emulator.base_url}/v1.0/me/mailFolders"
    token = TokenSource(store, account_id, settings).access_token()
    assert _status(folders, token) == 200
    for _ in range(2):
        graph_emulator.expire_access_tokens()
        assert _status(folders, token) == 401
        # A new source each time: only the stored (rotated) refresh token can work.
        token = TokenSource(store, account_id, settings).rejected(token)
        assert _status(folders, token) == 200
