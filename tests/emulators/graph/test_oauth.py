"""The emulator's v2.0 identity endpoints: authorization code with PKCE, refresh rotation."""

from __future__ import annotations

import base64
import hashlib
import secrets
from urllib.parse import parse_qs, urlsplit

import httpx

from tests.emulators.graph.server import GraphEmulator

REDIRECT = "http://127.0.0.1:8765/callback"


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    digest = hashlib.sha256(verifier.encode()).digest()
    return verifier, base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _authorize(emulator: GraphEmulator, challenge: str | None, **extra: str) -> dict[str, str]:
    params = {
        "client_id": "mailroom-test",
        "response_type": "code",
        "redirect_uri": REDIRECT,
        "scope": "offline_access Mail.ReadWrite",
        "state": "s-123",
        **extra,
    }
    if challenge is not None:
        params.update(code_challenge=challenge, code_challenge_method="S256")
    response = httpx.get(emulator.authorize_url(), params=params)
    assert response.status_code == 302
    location = urlsplit(response.headers["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == REDIRECT
    return {k: v[0] for k, v in parse_qs(location.query).items()}


def _redeem(emulator: GraphEmulator, code: str, verifier: str) -> httpx.Response:
    return httpx.post(
        emulator.token_url(),
        data={
            "grant_type": "authorization_code",
            "client_id": "mailroom-test",
            "code": code,
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
        },
    )


def test_code_with_pkce_gives_tokens_that_open_the_mailbox(graph_emulator: GraphEmulator) -> None:
    """An authorization code redeemed with the matching verifier yields working tokens."""
    verifier, challenge = _pkce()
    answer = _authorize(graph_emulator, challenge)
    assert answer["state"] == "s-123"
    response = _redeem(graph_emulator, answer["code"], verifier)
    assert response.status_code == 200
    tokens = response.json()
    assert tokens["token_type"] == "Bearer" and tokens["expires_in"] > 0
    assert tokens["refresh_token"]
    inbox = httpx.get(
        f"{graph_emulator.graph_url}/me/mailFolders/inbox",
        headers={"Authorization": f"Bearer {tokens['access_token']}"},
    )
    assert inbox.status_code == 200 and inbox.json()["displayName"] == "Inbox"


def test_code_is_refused_with_a_wrong_verifier_or_a_second_time(
    graph_emulator: GraphEmulator,
) -> None:
    """A wrong code_verifier is invalid_grant, and a code works only once."""
    verifier, challenge = _pkce()
    code = _authorize(graph_emulator, challenge)["code"]
    wrong = _redeem(graph_emulator, code, "not-the-verifier")
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    assert _redeem(graph_emulator, code, verifier).status_code == 200
    again = _redeem(graph_emulator, code, verifier)
    assert again.status_code == 400
    assert again.json()["error"] == "invalid_grant"
    assert again.json()["error_codes"] == [54005]


def test_authorize_without_pkce_answers_an_error_to_the_redirect(
    graph_emulator: GraphEmulator,
) -> None:
    """PKCE is required: without a code_challenge the redirect carries invalid_request."""
    answer = _authorize(graph_emulator, None)
    assert answer["error"] == "invalid_request"
    assert "code" not in answer and answer["state"] == "s-123"


def test_refresh_rotates_and_the_old_refresh_token_is_refused(
    graph_emulator: GraphEmulator,
) -> None:
    """Every refresh returns a new refresh token; the one used before is then invalid_grant."""
    first = graph_emulator.issue_tokens()
    form = {"grant_type": "refresh_token", "client_id": "mailroom-test"}
    response = httpx.post(
        graph_emulator.token_url(), data={**form, "refresh_token": first["refresh_token"]}
    )
    assert response.status_code == 200
    second = response.json()
    assert second["refresh_token"] != first["refresh_token"]
    assert second["access_token"] != first["access_token"]
    reused = httpx.post(
        graph_emulator.token_url(), data={**form, "refresh_token": first["refresh_token"]}
    )
    assert reused.status_code == 400 and reused.json()["error"] == "invalid_grant"
    graph_emulator.revoke_refresh_tokens()
    revoked = httpx.post(
        graph_emulator.token_url(), data={**form, "refresh_token": second["refresh_token"]}
    )
    assert revoked.status_code == 400 and revoked.json()["error"] == "invalid_grant"


def test_expired_access_token_is_401_invalid_authentication_token(
    graph_emulator: GraphEmulator,
) -> None:
    """An expired bearer token is 401 with Graph's InvalidAuthenticationToken error body."""
    token = graph_emulator.issue_tokens()["access_token"]
    headers = {"Authorization": f"Bearer {token}"}
    url = f"{graph_emulator.graph_url}/me/mailFolders"
    assert httpx.get(url, headers=headers).status_code == 200
    graph_emulator.expire_access_tokens()
    response = httpx.get(url, headers=headers)
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "InvalidAuthenticationToken"
    assert {"date", "request-id"} <= set(error["innerError"])
    assert httpx.get(url).status_code == 401  # no token at all
