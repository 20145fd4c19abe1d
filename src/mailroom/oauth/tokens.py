"""Token sets and the token endpoint: the code exchange and the refresh grant (RFC 6749 §4.1, §6).

* :class:`TokenSet` is what a token endpoint answered: the access token, the
  refresh token (Google answers none on refresh: the old one is kept; Microsoft
  answers a new one every time, which replaces it), when the access token
  expires (absolute Unix seconds), the scope and the id_token. Its repr shows no
  token, so a token cannot reach a log line by accident.
* :class:`TokenEndpoint` makes the two calls, through the SSRF guard
  (:mod:`.transport`), with the client's id and (for a confidential client) its
  secret in the form body.

Errors (RFC 6749 §5.2), each one sentence:

    invalid_grant     AuthError   code, verifier or redirect URI wrong; refresh token revoked
    invalid_client    AuthError   unknown client id or wrong client secret
    other 4xx error   AuthError   (invalid_request, unauthorized_client, invalid_scope, ...)
    5xx, 429          TransientError
    network, no JSON  TransientError
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from mailroom.oauth.transport import DEFAULT_TIMEOUT, post_form
from mailroom.providers.base import AuthError, TransientError

__all__ = ["OAuthClient", "TokenEndpoint", "TokenSet"]


@dataclass(frozen=True, slots=True)
class OAuthClient:
    """The application registered with the provider: its id and, if confidential, its secret."""

    client_id: str
    client_secret: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class TokenSet:
    """The tokens of one account; ``expires_at`` is absolute Unix time (None: not said)."""

    access_token: str = field(repr=False)
    refresh_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None
    scope: str = ""
    token_type: str = "Bearer"
    id_token: str | None = field(default=None, repr=False)

    def expired(self, now: float, margin: float = 0.0) -> bool:
        """Whether the access token is expired, or will be within ``margin`` seconds."""
        return self.expires_at is not None and now + margin >= self.expires_at

    def as_json(self) -> dict[str, Any]:
        """The fields as JSON values (sealed before they are stored)."""
        return {
            "access_token": self.access_token,
            "refresh_token": self.refresh_token,
            "expires_at": self.expires_at,
            "scope": self.scope,
            "token_type": self.token_type,
            "id_token": self.id_token,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TokenSet:
        """Read back :meth:`as_json` (KeyError/TypeError/ValueError when it is not one)."""
        expires = data.get("expires_at")
        return cls(
            access_token=str(data["access_token"]),
            refresh_token=None if data.get("refresh_token") is None else str(data["refresh_token"]),
            expires_at=None if expires is None else float(expires),
            scope=str(data.get("scope") or ""),
            token_type=str(data.get("token_type") or "Bearer"),
            id_token=None if data.get("id_token") is None else str(data["id_token"]),
        )


def _answer(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = None
    return data if isinstance(data, dict) else {}


def _refusal(error: str, grant: str, host: str) -> AuthError:
    if error == "invalid_grant":
        what = (
            "refused the stored sign-in (it was revoked or has expired); connect the account again"
            if grant == "refresh_token"
            else "refused the authorization code; start the connection again"
        )
        return AuthError(f"The sign-in server {host} {what}.", reason="invalid_grant")
    if error == "invalid_client":
        return AuthError(
            f"The sign-in server {host} does not accept this client id or client secret; check "
            "--client-id and the client secret file.",
            reason="invalid_client",
        )
    return AuthError(
        f"The sign-in server {host} refused the request ({error}); check the client's "
        "registration (redirect URIs, permissions) and try again.",
        reason=error,
    )


class TokenEndpoint:
    """The token URL of one authorization server, called for one client."""

    def __init__(
        self,
        token_url: str,
        client: OAuthClient,
        *,
        allowed_hosts: Iterable[str] = (),
        timeout: float = DEFAULT_TIMEOUT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.token_url = token_url
        self.client = client
        self._allowed = list(allowed_hosts)
        self._timeout = timeout
        self._clock = clock

    @property
    def host(self) -> str:
        """The token endpoint's host name, for sentences."""
        return httpx.URL(self.token_url).host

    def exchange_code(self, code: str, redirect_uri: str, verifier: str) -> TokenSet:
        """Trade an authorization code (with the PKCE verifier) for the account's tokens."""
        tokens = self._grant(
            {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": redirect_uri,
                "code_verifier": verifier,
            }
        )
        if tokens.refresh_token is None:
            raise AuthError(
                f"The sign-in server {self.host} gave no refresh token, so mailroom could not "
                "stay connected; start again and allow offline access.",
                reason="no refresh token",
            )
        return tokens

    def refresh(self, tokens: TokenSet) -> TokenSet:
        """New tokens from ``tokens.refresh_token``; the refresh token is kept unless rotated."""
        if tokens.refresh_token is None:
            raise AuthError(
                "The account has no refresh token; connect it again.", reason="no refresh token"
            )
        fresh = self._grant({"grant_type": "refresh_token", "refresh_token": tokens.refresh_token})
        if fresh.refresh_token is None:
            fresh = replace(fresh, refresh_token=tokens.refresh_token)
        if not fresh.id_token and tokens.id_token:
            fresh = replace(fresh, id_token=tokens.id_token)
        return fresh

    def _grant(self, form: dict[str, str]) -> TokenSet:
        form = {**form, "client_id": self.client.client_id}
        if self.client.client_secret:
            form["client_secret"] = self.client.client_secret
        sent_at = self._clock()
        response = post_form(
            self.token_url, form, allowed_hosts=self._allowed, timeout=self._timeout
        )
        data = _answer(response)
        if response.status_code == 429 or response.status_code >= 500:
            raise TransientError(
                f"The sign-in server {self.host} is busy (HTTP {response.status_code}); "
                "try again later.",
                reason=f"token endpoint HTTP {response.status_code}",
            )
        if response.status_code != 200:
            error = data.get("error")
            raise _refusal(
                error if isinstance(error, str) and error else f"HTTP {response.status_code}",
                form["grant_type"],
                self.host,
            )
        access = data.get("access_token")
        if not isinstance(access, str) or not access:
            raise TransientError(
                f"The sign-in server {self.host} answered without an access token; try again.",
                reason="token endpoint answered no access token",
            )
        return _token_set(data, sent_at)


def _token_set(data: dict[str, Any], sent_at: float) -> TokenSet:
    lifetime = data.get("expires_in")
    try:
        expires_at = sent_at + float(lifetime) if lifetime is not None else None
    except (TypeError, ValueError):
        expires_at = None
    refresh = data.get("refresh_token")
    id_token = data.get("id_token")
    return TokenSet(
        access_token=str(data["access_token"]),
        refresh_token=refresh if isinstance(refresh, str) and refresh else None,
        expires_at=expires_at,
        scope=str(data.get("scope") or ""),
        token_type=str(data.get("token_type") or "Bearer"),
        id_token=id_token if isinstance(id_token, str) and id_token else None,
    )
