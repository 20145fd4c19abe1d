"""The installed-app flow (RFC 8252): browser sign-in, loopback redirect, code exchange.

1. Listen on ``127.0.0.1:<free port>`` (:class:`.loopback.LoopbackReceiver`).
2. Build the authorization URL: ``response_type=code``, the client id, that
   redirect URI, the scopes, a signed ``state`` bound to (provider, client id,
   redirect URI) (:mod:`.state`), the PKCE S256 challenge (:mod:`.pkce`), the
   provider's extra parameters and a ``login_hint`` when the address is known.
3. Hand the URL to ``announce`` (the CLI prints it) and wait for the browser.
4. Exchange the code, with the verifier and the same redirect URI, at the
   token endpoint (:class:`.tokens.TokenEndpoint`, through the SSRF guard).

Every failure is a provider error with one sentence: a refusal or a foreign
state (AuthError), no answer in time or a server that cannot be reached
(TransientError).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from urllib.parse import urlencode

from mailroom.oauth.endpoints import OAuthEndpoints
from mailroom.oauth.loopback import DEFAULT_WAIT, LoopbackReceiver
from mailroom.oauth.pkce import new_pkce
from mailroom.oauth.state import StateSigner
from mailroom.oauth.tokens import OAuthClient, TokenEndpoint, TokenSet

__all__ = ["authorization_url", "run_installed_app_flow"]


def authorization_url(
    endpoints: OAuthEndpoints,
    client_id: str,
    *,
    redirect_uri: str,
    state: str,
    code_challenge: str,
    login_hint: str | None = None,
) -> str:
    """The URL the owner opens to sign in and allow mailroom access."""
    params = [
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect_uri),
        ("scope", " ".join(endpoints.scopes)),
        ("state", state),
        ("code_challenge", code_challenge),
        ("code_challenge_method", "S256"),
        *endpoints.extra_params,
    ]
    if login_hint:
        params.append(("login_hint", login_hint))
    separator = "&" if "?" in endpoints.authorize_url else "?"
    return f"{endpoints.authorize_url}{separator}{urlencode(params)}"


def run_installed_app_flow(
    endpoints: OAuthEndpoints,
    client: OAuthClient,
    *,
    signer: StateSigner,
    announce: Callable[[str], None],
    allowed_hosts: Iterable[str] = (),
    wait: float = DEFAULT_WAIT,
    login_hint: str | None = None,
) -> TokenSet:
    """Sign the owner in through the browser; the account's tokens."""
    pkce = new_pkce()
    with LoopbackReceiver() as receiver:
        redirect_uri = receiver.redirect_uri
        binding = f"{endpoints.provider}\n{client.client_id}\n{redirect_uri}"
        state = signer.issue(binding, ttl=wait + 60)
        announce(
            authorization_url(
                endpoints,
                client.client_id,
                redirect_uri=redirect_uri,
                state=state,
                code_challenge=pkce.challenge,
                login_hint=login_hint,
            )
        )
        code = receiver.wait(lambda answered: signer.verify(answered, binding), timeout=wait)
    token_endpoint = TokenEndpoint(endpoints.token_url, client, allowed_hosts=allowed_hosts)
    return token_endpoint.exchange_code(code, redirect_uri, pkce.verifier)
