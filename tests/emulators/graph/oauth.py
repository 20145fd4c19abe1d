"""The Microsoft identity platform v2.0 endpoints, as far as a mail client uses them.

* ``GET /{tenant}/oauth2/v2.0/authorize`` — consent is given at once (for the
  ``login_hint`` mailbox, else the first one): a 302 to ``redirect_uri`` with
  ``code`` and ``state``. PKCE is required (``code_challenge``, S256 or plain);
  errors go back to the redirect as ``error`` / ``error_description``.
* ``POST /{tenant}/oauth2/v2.0/token`` (form-encoded):
  ``grant_type=authorization_code`` (``code``, ``redirect_uri``, ``client_id``,
  ``code_verifier``; a code works once) and ``grant_type=refresh_token``
  (rotation: every refresh returns a new refresh token and the old one is then
  refused). A refresh token is issued only with the ``offline_access`` scope.
  Errors are ``400 {"error", "error_description", "error_codes", ...}`` with the
  AADSTS numbers the real service uses.

Access tokens are opaque; one names its mailbox until it expires (``expires_in``
seconds, or at once through :meth:`TokenIssuer.expire_access_tokens`).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

ACCESS_LIFETIME = 3600
CODE_LIFETIME = 600


@dataclass
class Grant:
    """What a code, an access token or a refresh token was issued for."""

    address: str
    client_id: str
    scope: str
    expires: float
    redirect_uri: str = ""
    challenge: str = ""
    method: str = "S256"
    used: bool = False


class OAuthError(Exception):
    """A token endpoint error: the ``error`` code, its description, an AADSTS number."""

    def __init__(self, error: str, description: str, number: int, status: int = 400) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.number = number
        self.status = status

    def body(self) -> dict[str, Any]:
        """The JSON body the v2.0 endpoint sends."""
        return {
            "error": self.error,
            "error_description": f"AADSTS{self.number}: {self.description}",
            "error_codes": [self.number],
            "timestamp": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%SZ"),
            "trace_id": str(uuid.uuid4()),
            "correlation_id": str(uuid.uuid4()),
        }


def _challenge(verifier: str, method: str) -> str:
    if method == "plain":
        return verifier
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def loopback(uri: str) -> bool:
    """Whether a redirect URI is a loopback one (any port is allowed for those)."""
    parts = urlsplit(uri)
    return parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1")


class TokenIssuer:
    """Codes, access tokens and refresh tokens; thread-safe."""

    def __init__(self, default_address: str, access_lifetime: int = ACCESS_LIFETIME) -> None:
        self.default_address = default_address
        self.access_lifetime = access_lifetime
        self.clients: dict[str, set[str]] = {}  # client id -> extra allowed redirect URIs
        self.lock = threading.Lock()
        self.codes: dict[str, Grant] = {}
        self.access: dict[str, Grant] = {}
        self.refresh: dict[str, Grant] = {}

    def register_client(self, client_id: str, redirect_uris: tuple[str, ...] = ()) -> None:
        """Allow an application id (loopback redirects are always allowed for it)."""
        with self.lock:
            self.clients.setdefault(client_id, set()).update(redirect_uris)

    # -- authorize -----------------------------------------------------------

    def authorize(self, query: dict[str, str], addresses: list[str]) -> str:
        """The URL the browser is redirected to (a code, or an error) for an authorize call."""
        redirect = query.get("redirect_uri", "")
        client = query.get("client_id", "")
        with self.lock:
            allowed = client in self.clients and (
                loopback(redirect) or redirect in self.clients[client]
            )
        if not allowed:
            raise OAuthError(
                "invalid_request", "The redirect URI or application is not registered.", 50011
            )
        state = query.get("state")

        def back(**params: str) -> str:
            if state is not None:
                params["state"] = state
            joiner = "&" if "?" in redirect else "?"
            return f"{redirect}{joiner}{urlencode(params)}"

        if query.get("response_type") != "code":
            return back(error="unsupported_response_type", error_description="Use code.")
        challenge = query.get("code_challenge", "")
        method = query.get("code_challenge_method", "plain")
        if not challenge or method not in ("S256", "plain"):
            return back(
                error="invalid_request",
                error_description="AADSTS9002325: Proof Key for Code Exchange is required.",
            )
        hint = query.get("login_hint", "").lower()
        address = hint if hint in addresses else self.default_address
        code = secrets.token_urlsafe(32)
        with self.lock:
            self.codes[code] = Grant(
                address,
                client,
                query.get("scope", ""),
                time.monotonic() + CODE_LIFETIME,
                redirect,
                challenge,
                method,
            )
        return back(code=code)

    # -- token ---------------------------------------------------------------

    def token(self, form: dict[str, str]) -> dict[str, Any]:
        """The token endpoint's answer for a form, or :class:`OAuthError`."""
        grant_type = form.get("grant_type")
        if grant_type == "authorization_code":
            return self._redeem_code(form)
        if grant_type == "refresh_token":
            return self._redeem_refresh(form)
        raise OAuthError("unsupported_grant_type", "The grant type is not supported.", 70003)

    def _redeem_code(self, form: dict[str, str]) -> dict[str, Any]:
        with self.lock:
            grant = self.codes.get(form.get("code", ""))
            if grant is None or grant.expires < time.monotonic():
                raise OAuthError("invalid_grant", "The code is not valid or has expired.", 70008)
            if grant.used:
                raise OAuthError(
                    "invalid_grant", "OAuth2 Authorization code was already redeemed.", 54005
                )
            if form.get("client_id") != grant.client_id:
                raise OAuthError("invalid_client", "The code was issued to another client.", 700005)
            if form.get("redirect_uri") != grant.redirect_uri:
                raise OAuthError(
                    "invalid_grant", "The redirect URI does not match the authorize call.", 50148
                )
            verifier = form.get("code_verifier", "")
            if not verifier or _challenge(verifier, grant.method) != grant.challenge:
                raise OAuthError(
                    "invalid_grant", "The code_verifier does not match the code_challenge.", 501481
                )
            grant.used = True
            return self._issue(grant.address, grant.client_id, grant.scope)

    def _redeem_refresh(self, form: dict[str, str]) -> dict[str, Any]:
        with self.lock:
            grant = self.refresh.get(form.get("refresh_token", ""))
            if grant is None or grant.used:
                raise OAuthError(
                    "invalid_grant",
                    "The refresh token has expired or been revoked; sign in again.",
                    700082,
                )
            if form.get("client_id") != grant.client_id:
                raise OAuthError(
                    "invalid_client", "The refresh token was issued to another client.", 700005
                )
            grant.used = True
            return self._issue(grant.address, grant.client_id, form.get("scope") or grant.scope)

    def _issue(self, address: str, client_id: str, scope: str) -> dict[str, Any]:
        access = "EwB" + secrets.token_urlsafe(40)
        expires = time.monotonic() + self.access_lifetime
        self.access[access] = Grant(address, client_id, scope, expires)
        body: dict[str, Any] = {
            "token_type": "Bearer",
            "scope": scope,
            "expires_in": self.access_lifetime,
            "ext_expires_in": self.access_lifetime,
            "access_token": access,
        }
        if "offline_access" in scope.split():
            refresh = "M.C5" + secrets.token_urlsafe(48)
            self.refresh[refresh] = Grant(address, client_id, scope, float("inf"))
            body["refresh_token"] = refresh
        return body

    # -- scripting and lookups ------------------------------------------------

    def issue(self, address: str, client_id: str = "mailroom-test") -> dict[str, Any]:
        """Tokens for ``address`` without the browser step (scripting)."""
        with self.lock:
            self.clients.setdefault(client_id, set())
            return self._issue(address, client_id, "offline_access Mail.ReadWrite Mail.Send")

    def mailbox_of(self, access_token: str) -> str | None:
        """The mailbox address an access token is valid for now, or None."""
        with self.lock:
            grant = self.access.get(access_token)
            if grant is None or grant.expires <= time.monotonic():
                return None
            return grant.address

    def expire_access_tokens(self) -> None:
        """Every access token issued so far is expired from now on."""
        with self.lock:
            for grant in self.access.values():
                grant.expires = 0.0

    def revoke_refresh_tokens(self) -> None:
        """Every refresh token issued so far is refused from now on (password changed)."""
        with self.lock:
            for grant in self.refresh.values():
                grant.used = True
