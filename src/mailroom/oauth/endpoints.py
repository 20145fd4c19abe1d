"""Where each provider's authorization server is, and what mailroom asks it for.

One frozen :class:`OAuthEndpoints` per provider: the authorization URL (opened
in the browser), the token URL (called by mailroom, through the SSRF guard), the
scopes and the extra parameters of the authorization request.

* **Google** (installed app): ``access_type=offline`` asks for a refresh token and
  ``prompt=consent`` makes Google issue one even when the owner consented before.
  Scope ``gmail.modify`` reads, labels, trashes and sends mail (everything
  mailroom does but deleting for ever); ``openid email`` let a later step learn
  the address from the id_token.
* **Microsoft identity platform v2.0**: ``/{tenant}/oauth2/v2.0/authorize`` and
  ``/token``; ``offline_access`` asks for a refresh token (which rotates: every
  refresh answers a new one), ``Mail.ReadWrite`` / ``Mail.Send`` are the Graph mail
  permissions, ``User.Read`` the profile.

:meth:`OAuthEndpoints.at` moves both URLs to another origin (an emulator or a
test server on 127.0.0.1), keeping their paths.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from urllib.parse import urlsplit, urlunsplit

from mailroom.errors import ConfigError

__all__ = ["GOOGLE", "MICROSOFT", "OAuthEndpoints", "microsoft"]


@dataclass(frozen=True, slots=True)
class OAuthEndpoints:
    """One authorization server: its two URLs, the scopes, extra authorization parameters."""

    provider: str  # the Account.provider value of the accounts it signs in
    authorize_url: str
    token_url: str
    scopes: tuple[str, ...]
    extra_params: tuple[tuple[str, str], ...] = ()

    def at(self, base_url: str) -> OAuthEndpoints:
        """The same endpoints served from ``base_url`` (scheme, host and port; paths kept)."""
        base = urlsplit(base_url.strip())
        if base.scheme not in ("http", "https") or not base.hostname:
            raise ConfigError(
                f"{base_url!r} is not the address of an authorization server; give one such as "
                "https://login.example.org."
            )
        prefix = base.path.rstrip("/")

        def moved(url: str) -> str:
            parts = urlsplit(url)
            return urlunsplit((base.scheme, base.netloc, prefix + parts.path, parts.query, ""))

        return replace(
            self, authorize_url=moved(self.authorize_url), token_url=moved(self.token_url)
        )


GOOGLE = OAuthEndpoints(
    provider="gmail",
    authorize_url="https://accounts.google.com/o/oauth2/v2/auth",
    token_url="https://oauth2.googleapis.com/token",
    scopes=("https://www.googleapis.com/auth/gmail.modify", "openid", "email"),
    extra_params=(("access_type", "offline"), ("prompt", "consent")),
)

_MICROSOFT_LOGIN = "https://login.microsoftonline.com"
_MICROSOFT_SCOPES = (
    "offline_access",
    "openid",
    "email",
    "https://graph.microsoft.com/Mail.ReadWrite",
    "https://graph.microsoft.com/Mail.Send",
    "https://graph.microsoft.com/User.Read",
)


def microsoft(tenant: str = "common") -> OAuthEndpoints:
    """The Microsoft identity platform v2.0 endpoints of ``tenant``.

    ``common`` takes work, school and personal accounts, ``organizations`` and
    ``consumers`` one kind, or a directory's id or domain only its users.
    """
    tenant = tenant.strip()
    if not tenant or not all(ch.isalnum() or ch in "-._" for ch in tenant):
        raise ConfigError(
            f"{tenant!r} is not a Microsoft tenant; give common, organizations, consumers, "
            "a directory id or a domain such as contoso.onmicrosoft.com."
        )
    base = f"{_MICROSOFT_LOGIN}/{tenant}/oauth2/v2.0"
    return OAuthEndpoints(
        provider="microsoft",
        authorize_url=f"{base}/authorize",
        token_url=f"{base}/token",
        scopes=_MICROSOFT_SCOPES,
    )


MICROSOFT = microsoft("common")
