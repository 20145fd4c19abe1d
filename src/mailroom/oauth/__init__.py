"""OAuth 2 for mail providers: the installed-app sign-in and tokens that stay valid.

Provider-neutral; Gmail and Microsoft differ only in their
:class:`~mailroom.oauth.endpoints.OAuthEndpoints`. One concept per module:

``pkce``         the PKCE verifier and its S256 challenge (RFC 7636)
``state``        the HMAC-signed, expiring ``state`` bound to one flow
``endpoints``    each provider's authorize/token URLs, scopes, extra parameters
``transport``    POSTing to a token endpoint through the SSRF guard
``tokens``       the token set, the code exchange and the refresh grant
``loopback``     the one-shot listener on 127.0.0.1 that receives the redirect
``flow``         the installed-app flow: URL, browser, code exchange (RFC 8252)
``credentials``  the account's plain settings and its sealed tokens
``source``       ``TokenSource``: a valid access token, refreshed and persisted
``connect``      connecting / reconnecting an account (checks, flow, row)
``secretfile``   reading a client secret from a file
``cli``          ``mailroom account add gmail`` / ``microsoft``
``web``          the same from the web accounts page (redirect, callback)
``providers``    those commands, for the provider entries

The names below are imported on first use: the Gmail and Microsoft provider
entries import ``mailroom.oauth.providers`` for the connect commands, and that
must not load httpx, SQLAlchemy sessions and the cipher library for every command.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mailroom.oauth.endpoints import GOOGLE, MICROSOFT, OAuthEndpoints, microsoft
    from mailroom.oauth.flow import run_installed_app_flow
    from mailroom.oauth.source import TokenSource
    from mailroom.oauth.tokens import OAuthClient, TokenEndpoint, TokenSet

_WHERE = {
    "GOOGLE": "endpoints",
    "MICROSOFT": "endpoints",
    "OAuthEndpoints": "endpoints",
    "microsoft": "endpoints",
    "run_installed_app_flow": "flow",
    "TokenSource": "source",
    "OAuthClient": "tokens",
    "TokenEndpoint": "tokens",
    "TokenSet": "tokens",
}

__all__ = [
    "GOOGLE",
    "MICROSOFT",
    "OAuthClient",
    "OAuthEndpoints",
    "TokenEndpoint",
    "TokenSet",
    "TokenSource",
    "microsoft",
    "run_installed_app_flow",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module when the name is first asked for."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"mailroom.oauth.{_WHERE[name]}"), name)
