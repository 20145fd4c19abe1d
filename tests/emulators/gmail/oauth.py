"""Google's OAuth 2 endpoints for an installed app, as the emulator serves them.

* ``GET /o/oauth2/v2/auth`` — the consent page. It approves at once (or, after
  :meth:`OAuthServer.deny_consent`, refuses with ``error=access_denied``) and
  redirects to ``redirect_uri`` with ``code``, ``state`` and ``scope``. A
  ``code_challenge`` (``S256`` or ``plain``) is remembered with the code.
* ``POST /token`` (form encoded), RFC 6749 + RFC 7636:
  ``grant_type=authorization_code`` needs the code, the same ``redirect_uri``,
  the client's id and secret and the ``code_verifier`` matching the
  challenge; a code works once. ``grant_type=refresh_token`` gives a new
  access token. Failures are ``400 {"error": "invalid_grant", ...}`` (or
  ``401 invalid_client``), the bodies Google sends.

Access tokens expire after ``access_token_lifetime`` seconds (or at once
after :meth:`OAuthServer.expire_access_tokens`); refresh tokens stay valid
until revoked.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

DEFAULT_CLIENT_ID = "emulator-client.apps.googleusercontent.com"
DEFAULT_CLIENT_SECRET = "emulator-client-secret"
DEFAULT_SCOPE = "https://www.googleapis.com/auth/gmail.modify"


@dataclass
class _Code:
    client_id: str
    redirect_uri: str
    scope: str
    challenge: str | None
    method: str


class OAuthError(Exception):
    """A refused token request: status and Google's ``{error, error_description}`` body."""

    def __init__(self, status: int, error: str, description: str) -> None:
        super().__init__(description)
        self.status = status
        self.body = {"error": error, "error_description": description}


def s256(verifier: str) -> str:
    """The S256 code challenge of a verifier (RFC 7636 §4.2)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")


class OAuthServer:
    """Clients, codes and tokens; thread-safe."""

    def __init__(
        self,
        client_id: str = DEFAULT_CLIENT_ID,
        client_secret: str = DEFAULT_CLIENT_SECRET,
        access_token_lifetime: float = 3599.0,
    ) -> None:
        self.client_id = client_id
        self.client_secret = client_secret
        self.access_token_lifetime = access_token_lifetime
        self.consent_denied = False
        self._codes: dict[str, _Code] = {}
        self._access: dict[str, float] = {}  # token -> expiry (time.time())
        self._refresh: dict[str, str] = {}  # refresh token -> scope
        self._lock = threading.Lock()

    # -- scripting --------------------------------------------------------

    def issue_tokens(self, scope: str = DEFAULT_SCOPE) -> tuple[str, str]:
        """A fresh (access token, refresh token) pair, as if the owner had consented."""
        with self._lock:
            refresh = "1//" + secrets.token_urlsafe(32)
            self._refresh[refresh] = scope
            return self._new_access(), refresh

    def _new_access(self) -> str:
        token = "ya29." + secrets.token_urlsafe(32)
        self._access[token] = time.time() + self.access_token_lifetime
        return token

    def expire_access_tokens(self) -> None:
        """Every access token issued so far answers 401 from now on."""
        with self._lock:
            for token in self._access:
                self._access[token] = 0.0

    def revoke_refresh_tokens(self) -> None:
        """Every refresh token is refused from now on (the owner revoked the app)."""
        with self._lock:
            self._refresh.clear()

    def deny_consent(self, denied: bool = True) -> None:
        """Make the consent page refuse (``error=access_denied``)."""
        self.consent_denied = denied

    # -- checks -----------------------------------------------------------

    def valid(self, authorization: str | None) -> bool:
        """Whether an ``Authorization: Bearer`` header carries a live access token."""
        if not authorization or not authorization.startswith("Bearer "):
            return False
        token = authorization[len("Bearer ") :].strip()
        with self._lock:
            expiry = self._access.get(token)
        return expiry is not None and expiry > time.time()

    # -- endpoints --------------------------------------------------------

    def authorize(self, params: dict[str, str]) -> str:
        """The consent page's answer: the URL it redirects to."""
        redirect_uri = params.get("redirect_uri", "")
        if params.get("client_id") != self.client_id or not redirect_uri:
            raise OAuthError(400, "invalid_request", "The OAuth client was not found.")
        state = params.get("state")
        answer: dict[str, str] = {}
        if self.consent_denied:
            answer["error"] = "access_denied"
        else:
            code = "4/" + secrets.token_urlsafe(24)
            with self._lock:
                self._codes[code] = _Code(
                    self.client_id,
                    redirect_uri,
                    params.get("scope", DEFAULT_SCOPE),
                    params.get("code_challenge"),
                    params.get("code_challenge_method", "plain"),
                )
            answer["code"] = code
            answer["scope"] = params.get("scope", DEFAULT_SCOPE)
        if state is not None:
            answer["state"] = state
        separator = "&" if "?" in redirect_uri else "?"
        return redirect_uri + separator + urlencode(answer)

    def token(self, form: dict[str, str]) -> dict[str, Any]:
        """Answer a token request (raises :class:`OAuthError`)."""
        if form.get("client_id") != self.client_id or form.get("client_secret") != (
            self.client_secret
        ):
            raise OAuthError(401, "invalid_client", "Unauthorized")
        grant = form.get("grant_type")
        if grant == "authorization_code":
            return self._exchange(form)
        if grant == "refresh_token":
            return self._refresh_grant(form)
        raise OAuthError(400, "unsupported_grant_type", f"Invalid grant_type: {grant}")

    def _exchange(self, form: dict[str, str]) -> dict[str, Any]:
        with self._lock:
            code = self._codes.pop(form.get("code", ""), None)
        if code is None or code.redirect_uri != form.get("redirect_uri"):
            raise OAuthError(400, "invalid_grant", "Bad Request")
        if code.challenge is not None:
            verifier = form.get("code_verifier", "")
            expected = s256(verifier) if code.method == "S256" else verifier
            if not verifier or not secrets.compare_digest(expected, code.challenge):
                raise OAuthError(400, "invalid_grant", "Invalid code verifier.")
        access, refresh = self.issue_tokens(code.scope)
        return {
            "access_token": access,
            "expires_in": int(self.access_token_lifetime),
            "refresh_token": refresh,
            "scope": code.scope,
            "token_type": "Bearer",
        }

    def _refresh_grant(self, form: dict[str, str]) -> dict[str, Any]:
        refresh = form.get("refresh_token", "")
        with self._lock:
            scope = self._refresh.get(refresh)
            if scope is None:
                raise OAuthError(400, "invalid_grant", "Token has been expired or revoked.")
            access = self._new_access()
        return {
            "access_token": access,
            "expires_in": int(self.access_token_lifetime),
            "scope": scope,
            "token_type": "Bearer",
        }
