"""The emulator's OAuth endpoints: consent, PKCE code exchange, refresh, expiry."""

from __future__ import annotations

import secrets
from urllib.parse import parse_qs, urlsplit

import httpx

from tests.emulators.gmail.emulator import GmailEmulator
from tests.emulators.gmail.oauth import s256

REDIRECT = "http://127.0.0.1:8765/callback"


def _consent(gmail: GmailEmulator, challenge: str) -> dict[str, list[str]]:
    params = {
        "client_id": gmail.oauth.client_id,
        "redirect_uri": REDIRECT,
        "response_type": "code",
        "scope": "https://www.googleapis.com/auth/gmail.modify",
        "state": "st-1",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    answer = httpx.get(f"{gmail.url}/o/oauth2/v2/auth", params=params)
    assert answer.status_code == 302
    location = answer.headers["location"]
    assert location.startswith(REDIRECT + "?")
    return parse_qs(urlsplit(location).query)


def _token(gmail: GmailEmulator, **form: str) -> httpx.Response:
    form = {"client_id": gmail.oauth.client_id, "client_secret": gmail.oauth.client_secret, **form}
    return httpx.post(f"{gmail.url}/token", data=form)


def _exchange(gmail: GmailEmulator, code: str, verifier: str) -> httpx.Response:
    return _token(
        gmail,
        grant_type="authorization_code",
        code=code,
        redirect_uri=REDIRECT,
        code_verifier=verifier,
    )


def test_code_exchange_checks_the_pkce_verifier(gmail_emulator: GmailEmulator) -> None:
    """The code is traded only with the verifier matching its S256 challenge, once."""
    verifier = secrets.token_urlsafe(48)
    query = _consent(gmail_emulator, s256(verifier))
    assert query["state"] == ["st-1"]
    code = query["code"][0]
    wrong = _exchange(gmail_emulator, code, "not-it")
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"
    code = _consent(gmail_emulator, s256(verifier))["code"][0]
    good = _exchange(gmail_emulator, code, verifier)
    assert good.status_code == 200
    tokens = good.json()
    assert tokens["token_type"] == "Bearer" and tokens["refresh_token"] and tokens["expires_in"]
    again = _exchange(gmail_emulator, code, verifier)
    assert again.status_code == 400
    profile = httpx.get(
        f"{gmail_emulator.url}/gmail/v1/users/me/profile",
        headers={"Authorization": f"Bearer {tokens['access_token']}"},
    )
    assert profile.status_code == 200


def test_denied_consent_redirects_with_access_denied(gmail_emulator: GmailEmulator) -> None:
    """A refused consent comes back as error=access_denied with the state."""
    gmail_emulator.oauth.deny_consent()
    query = _consent(gmail_emulator, s256("v" * 43))
    assert query == {"error": ["access_denied"], "state": ["st-1"]}


def test_refresh_and_revocation(gmail_emulator: GmailEmulator) -> None:
    """A refresh token gives new access tokens until it is revoked (invalid_grant)."""
    _, refresh = gmail_emulator.tokens()
    fresh = _token(gmail_emulator, grant_type="refresh_token", refresh_token=refresh)
    assert fresh.status_code == 200 and "refresh_token" not in fresh.json()
    gmail_emulator.revoke_refresh_tokens()
    refused = _token(gmail_emulator, grant_type="refresh_token", refresh_token=refresh)
    assert refused.status_code == 400
    assert refused.json() == {
        "error": "invalid_grant",
        "error_description": "Token has been expired or revoked.",
    }


def test_wrong_client_secret_is_invalid_client(gmail_emulator: GmailEmulator) -> None:
    """A wrong client secret is 401 invalid_client."""
    _, refresh = gmail_emulator.tokens()
    answer = httpx.post(
        f"{gmail_emulator.url}/token",
        data={
            "client_id": gmail_emulator.oauth.client_id,
            "client_secret": "nope",
            "grant_type": "refresh_token",
            "refresh_token": refresh,
        },
    )
    assert answer.status_code == 401 and answer.json()["error"] == "invalid_client"


def test_expired_access_token_answers_googles_401(gmail_emulator: GmailEmulator) -> None:
    """An expired token gets 401 with Google's authError body and a WWW-Authenticate header."""
    token = gmail_emulator.access_token()
    gmail_emulator.expire_tokens()
    answer = httpx.get(
        f"{gmail_emulator.url}/gmail/v1/users/me/labels",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"].startswith("Bearer")
    error = answer.json()["error"]
    assert error["code"] == 401 and error["status"] == "UNAUTHENTICATED"
    assert error["errors"][0]["reason"] == "authError"
    assert error["errors"][0]["message"] == "Invalid Credentials"


def test_short_token_lifetime_expires() -> None:
    """Access tokens live only ``access_token_lifetime`` seconds."""
    with GmailEmulator(access_token_lifetime=0.0) as gmail:
        answer = httpx.get(
            f"{gmail.url}/gmail/v1/users/me/profile",
            headers={"Authorization": f"Bearer {gmail.access_token()}"},
        )
    assert answer.status_code == 401
