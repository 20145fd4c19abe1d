"""Connecting a test account through the real flow (the test playing the browser)."""

from __future__ import annotations

from mailroom.config import Settings
from mailroom.oauth.connect import ConnectRequest, connect_account
from mailroom.oauth.endpoints import GOOGLE, OAuthEndpoints
from mailroom.oauth.tokens import OAuthClient
from mailroom.store.engine import Store
from tests.oauth.browser import Background, open_in_browser
from tests.oauth.conftest import CLIENT_ID, CLIENT_SECRET
from tests.oauth.server import AuthServer


def connect(
    store: Store,
    settings: Settings,
    auth_server: AuthServer,
    *,
    endpoints: OAuthEndpoints = GOOGLE,
    client: OAuthClient | None = None,
    name: str = "work",
    reconnect: bool = False,
) -> int:
    """Connect (or reconnect) the account ``name`` of "me"; its id."""
    request = ConnectRequest(
        endpoints.at(auth_server.url),
        client or OAuthClient(CLIENT_ID, CLIENT_SECRET),
        name=name,
        address="ann@example.org",
        owner="me",
        reconnect=reconnect,
        wait=20,
    )
    flow = Background(lambda announce: connect_account(store, settings, request, announce=announce))
    open_in_browser(flow.url())
    return flow.result()
