"""The installed-app flow against the local authorization server over real HTTP.

The test plays the browser: it follows the announced URL with httpx, the server
redirects to mailroom's loopback listener, and the flow exchanges the code.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from mailroom.config import Settings
from mailroom.oauth.endpoints import GOOGLE, OAuthEndpoints, microsoft
from mailroom.oauth.flow import run_installed_app_flow
from mailroom.oauth.pkce import challenge_for
from mailroom.oauth.state import StateError, StateSigner
from mailroom.oauth.tokens import OAuthClient, TokenEndpoint, TokenSet
from mailroom.providers.base import AuthError, TransientError
from mailroom.providers.netguard import BlockedHostError
from tests.oauth.browser import Background, open_in_browser
from tests.oauth.conftest import CLIENT_ID, CLIENT_SECRET, PUBLIC_CLIENT_ID
from tests.oauth.server import AuthServer

CONFIDENTIAL = OAuthClient(CLIENT_ID, CLIENT_SECRET)


def _flow(
    endpoints: OAuthEndpoints, client: OAuthClient, settings: Settings
) -> Background[TokenSet]:
    signer = StateSigner.from_settings(settings)
    return Background(
        lambda announce: run_installed_app_flow(
            endpoints,
            client,
            signer=signer,
            announce=announce,
            allowed_hosts=settings.allowed_private_host_list,
            wait=20,
            login_hint="ann@example.org",
        )
    )


def test_google_flow_asks_for_offline_access_and_returns_tokens(
    auth_server: AuthServer, settings: Settings
) -> None:
    """The URL carries PKCE, state, scopes and Google's extras; the flow returns live tokens."""
    flow = _flow(GOOGLE.at(auth_server.url), CONFIDENTIAL, settings)
    page = open_in_browser(flow.url())
    assert page.status_code == 200 and "Signed in" in page.text
    tokens = flow.result()
    assert auth_server.accepts(tokens.access_token)
    assert tokens.refresh_token in auth_server.refresh_tokens
    (asked,) = auth_server.authorize_requests
    assert asked["access_type"] == "offline" and asked["prompt"] == "consent"
    assert asked["code_challenge_method"] == "S256" and asked["login_hint"] == "ann@example.org"
    assert asked["scope"].split() == list(GOOGLE.scopes)
    (exchange,) = auth_server.grants("authorization_code")
    assert challenge_for(exchange["code_verifier"]) == asked["code_challenge"]
    assert exchange["redirect_uri"] == asked["redirect_uri"]
    assert urlsplit(asked["redirect_uri"]).hostname == "127.0.0.1"
    assert exchange["client_secret"] == CLIENT_SECRET
    assert auth_server.token_paths == ["/token"]


def test_microsoft_public_client_uses_the_tenant_path_and_no_secret(
    auth_server: AuthServer, settings: Settings
) -> None:
    """A public Microsoft client sends no secret; the tenant is in both endpoint paths."""
    endpoints = microsoft("contoso.onmicrosoft.com").at(auth_server.url)
    flow = _flow(endpoints, OAuthClient(PUBLIC_CLIENT_ID), settings)
    open_in_browser(flow.url())
    tokens = flow.result()
    assert auth_server.accepts(tokens.access_token)
    assert auth_server.token_paths == ["/contoso.onmicrosoft.com/oauth2/v2.0/token"]
    (exchange,) = auth_server.grants("authorization_code")
    assert "client_secret" not in exchange
    assert "offline_access" in auth_server.authorize_requests[0]["scope"].split()


def test_a_tampered_state_is_refused_before_any_code_exchange(
    auth_server: AuthServer, settings: Settings
) -> None:
    """A state changed on the way back ends the flow with StateError; no code is exchanged."""
    auth_server.tamper_state = True
    flow = _flow(GOOGLE.at(auth_server.url), CONFIDENTIAL, settings)
    page = open_in_browser(flow.url())
    assert page.status_code == 400
    with pytest.raises(StateError):
        flow.result()
    assert auth_server.token_requests == []


def test_access_denied_in_the_browser(auth_server: AuthServer, settings: Settings) -> None:
    """The owner refusing consent is an AuthError in one sentence."""
    auth_server.consent = "access_denied"
    flow = _flow(GOOGLE.at(auth_server.url), CONFIDENTIAL, settings)
    open_in_browser(flow.url())
    with pytest.raises(AuthError, match="Access was refused in the browser"):
        flow.result()


def _code_for(auth_server: AuthServer, verifier_challenge: str, redirect_uri: str) -> str:
    """An authorization code issued by the server (the browser leg, without a listener)."""
    status, headers, _ = auth_server.authorize(
        {
            "response_type": "code",
            "client_id": CLIENT_ID,
            "redirect_uri": redirect_uri,
            "scope": "mail",
            "state": "s",
            "code_challenge": verifier_challenge,
            "code_challenge_method": "S256",
        }
    )
    assert status == 302
    return parse_qs(urlsplit(headers["Location"]).query)["code"][0]


def test_the_token_endpoint_refuses_a_wrong_verifier_secret_or_redirect(
    auth_server: AuthServer, settings: Settings
) -> None:
    """PKCE mismatch and a changed redirect URI are invalid_grant; a wrong secret invalid_client."""
    redirect = "http://127.0.0.1:4000/callback"
    allowed = settings.allowed_private_host_list
    token_url = GOOGLE.at(auth_server.url).token_url
    endpoint = TokenEndpoint(token_url, CONFIDENTIAL, allowed_hosts=allowed)
    verifier = "v" * 50
    code = _code_for(auth_server, challenge_for(verifier), redirect)
    with pytest.raises(AuthError, match="refused the authorization code") as refused:
        endpoint.exchange_code(code, redirect, "w" * 50)
    assert refused.value.reason == "invalid_grant"
    code = _code_for(auth_server, challenge_for(verifier), redirect)
    with pytest.raises(AuthError, match="refused the authorization code"):
        endpoint.exchange_code(code, "http://127.0.0.1:4001/callback", verifier)
    wrong = TokenEndpoint(token_url, OAuthClient(CLIENT_ID, "nope"), allowed_hosts=allowed)
    code = _code_for(auth_server, challenge_for(verifier), redirect)
    with pytest.raises(AuthError, match="does not accept this client id or client secret"):
        wrong.exchange_code(code, redirect, verifier)
    assert endpoint.exchange_code(code, redirect, verifier).access_token  # the code is still good


def test_server_trouble_is_transient_and_the_guard_blocks_private_hosts(
    auth_server: AuthServer, settings: Settings
) -> None:
    """5xx is TransientError; a closed port too; without the allow-list 127.0.0.1 is blocked."""
    token_url = GOOGLE.at(auth_server.url).token_url
    allowed = settings.allowed_private_host_list
    tokens = TokenSet("a", refresh_token="r")
    auth_server.fail_next.append(503)
    with pytest.raises(TransientError, match="busy"):
        TokenEndpoint(token_url, CONFIDENTIAL, allowed_hosts=allowed).refresh(tokens)
    closed = GOOGLE.at("http://127.0.0.1:9").token_url
    with pytest.raises(TransientError, match="could not be reached"):
        TokenEndpoint(closed, CONFIDENTIAL, allowed_hosts=allowed).refresh(tokens)
    before = len(auth_server.token_requests)
    with pytest.raises(BlockedHostError):
        TokenEndpoint(token_url, CONFIDENTIAL).refresh(tokens)
    assert len(auth_server.token_requests) == before  # nothing was sent
