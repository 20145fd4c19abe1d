"""A small OAuth 2 authorization server over real HTTP on 127.0.0.1, for the connect tests.

Minimal on purpose (the Gmail and Graph emulators are the full providers), but
strict where RFC 6749 / 7636 / 8252 are: the authorize endpoint redirects with
``code`` and ``state`` only to a loopback redirect URI (any port), the token
endpoint checks the client (``client_secret_post``), the single-use code, the
redirect URI and the PKCE S256 verifier, and the refresh grant honours revocation
and, optionally, rotation (a new refresh token each time, the old one revoked).
Errors are RFC 6749 §5.2 JSON bodies.

Authorize paths end in ``/auth`` (Google) or ``/authorize`` (Microsoft), token
paths in ``/token``, so both providers' endpoints moved here with
``OAuthEndpoints.at(server.url)`` are served.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit


@dataclass
class Grant:
    """An issued authorization code and what it was issued for."""

    client_id: str
    redirect_uri: str
    challenge: str
    scope: str


@dataclass
class AuthServer:
    """The server's state; tests script it through the attributes and methods."""

    clients: dict[str, str | None]  # client id -> secret (None: a public client)
    access_ttl: float = 3600.0
    rotate: bool = False
    consent: str = "approve"  # or an RFC 6749 error code, e.g. "access_denied"
    tamper_state: bool = False
    codes: dict[str, Grant] = field(default_factory=dict)
    refresh_tokens: dict[str, str] = field(default_factory=dict)  # live token -> client id
    access_tokens: dict[str, float] = field(default_factory=dict)  # token -> expiry
    authorize_requests: list[dict[str, str]] = field(default_factory=list)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    token_paths: list[str] = field(default_factory=list)
    fail_next: list[int] = field(default_factory=list)  # statuses the next token calls answer
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def accepts(self, access_token: str) -> bool:
        """What a resource server would say: the token was issued here and is not expired."""
        with self.lock:
            expiry = self.access_tokens.get(access_token)
        return expiry is not None and expiry > time.time()

    def revoke_refresh_tokens(self) -> None:
        """The owner revoked mailroom's access: every refresh token stops working."""
        with self.lock:
            self.refresh_tokens.clear()

    def expire_access_tokens(self) -> None:
        """Every access token issued so far is expired now."""
        with self.lock:
            self.access_tokens = dict.fromkeys(self.access_tokens, 0.0)

    def grants(self, grant_type: str) -> list[dict[str, str]]:
        """The token requests of one grant type, in order."""
        return [form for form in self.token_requests if form.get("grant_type") == grant_type]

    # -- endpoints ----------------------------------------------------------

    def authorize(self, query: dict[str, str]) -> tuple[int, dict[str, str], dict[str, Any]]:
        """GET authorize: (status, headers, JSON body) — a redirect when the request is good."""
        self.authorize_requests.append(query)
        redirect = query.get("redirect_uri", "")
        parts = urlsplit(redirect)
        if (
            query.get("client_id") not in self.clients
            or parts.scheme != "http"
            or (parts.hostname != "127.0.0.1")
        ):
            # RFC 6749 §4.1.2.1: never redirect to an unverified URI.
            return 400, {}, {"error": "invalid_request"}
        answer: dict[str, str]
        if query.get("response_type") != "code" or query.get("code_challenge_method") != "S256":
            answer = {"error": "invalid_request"}
        elif self.consent != "approve":
            answer = {"error": self.consent, "error_description": "The user said no"}
        else:
            code = secrets.token_urlsafe(24)
            with self.lock:
                self.codes[code] = Grant(
                    query["client_id"], redirect, query.get("code_challenge", ""), query["scope"]
                )
            answer = {"code": code}
        state = query.get("state", "")
        if self.tamper_state and state:  # one character changed on the way back
            state = state[:-1] + ("A" if state[-1] != "A" else "B")
        answer["state"] = state
        return 302, {"Location": f"{redirect}?{urlencode(answer)}"}, {}

    def token(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """POST token: (status, JSON body)."""
        self.token_requests.append(form)
        if self.fail_next:
            return self.fail_next.pop(0), {"error": "temporarily_unavailable"}
        client_id = form.get("client_id", "")
        if client_id not in self.clients or self.clients[client_id] != form.get("client_secret"):
            return 401, {"error": "invalid_client"}
        with self.lock:
            if form.get("grant_type") == "authorization_code":
                return self._code_grant(client_id, form)
            if form.get("grant_type") == "refresh_token":
                return self._refresh_grant(client_id, form)
        return 400, {"error": "unsupported_grant_type"}

    def _code_grant(self, client_id: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        grant = self.codes.pop(form.get("code", ""), None)  # single use
        verifier = form.get("code_verifier", "")
        digest = hashlib.sha256(verifier.encode()).digest()
        challenge = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
        if (
            grant is None
            or grant.client_id != client_id
            or grant.redirect_uri != form.get("redirect_uri")
            or grant.challenge != challenge
        ):
            return 400, {"error": "invalid_grant"}
        refresh = secrets.token_urlsafe(32)
        self.refresh_tokens[refresh] = client_id
        return 200, {**self._access(grant.scope), "refresh_token": refresh}

    def _refresh_grant(self, client_id: str, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        old = form.get("refresh_token", "")
        if self.refresh_tokens.get(old) != client_id:
            return 400, {"error": "invalid_grant", "error_description": "Token has been revoked"}
        body = self._access("mail")
        if self.rotate:
            del self.refresh_tokens[old]
            body["refresh_token"] = secrets.token_urlsafe(32)
            self.refresh_tokens[body["refresh_token"]] = client_id
        return 200, body

    def _access(self, scope: str) -> dict[str, Any]:
        token = secrets.token_urlsafe(32)
        self.access_tokens[token] = time.time() + self.access_ttl
        return {
            "access_token": token,
            "token_type": "Bearer",
            "expires_in": int(self.access_ttl),
            "scope": scope,
        }


def _handler(auth: AuthServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            parts = urlsplit(self.path)
            if not parts.path.endswith(("/auth", "/authorize")):
                self._send(404, {}, {"error": "not_found"})
                return
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            self._send(*auth.authorize(query))

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode()
            if not self.path.endswith("/token"):
                self._send(404, {}, {"error": "not_found"})
                return
            auth.token_paths.append(self.path)
            form = {k: v[0] for k, v in parse_qs(body).items()}
            status, answer = auth.token(form)
            self._send(status, {"Cache-Control": "no-store"}, answer)

        def _send(self, status: int, headers: dict[str, str], body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            """Quiet."""

    return Handler


class RunningServer:
    """An AuthServer served on 127.0.0.1:<free port> in a thread."""

    def __init__(self, auth: AuthServer) -> None:
        self.auth = auth
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(auth))
        self._http.daemon_threads = True
        auth.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()
