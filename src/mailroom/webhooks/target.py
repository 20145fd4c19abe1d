"""Which URLs may receive webhooks: https anywhere public, http only to allow-listed private hosts.

Every URL passes the SSRF guard (:func:`mailroom.providers.netguard.check_host`)
when it is added and again when it is delivered to (the delivery client goes
through :mod:`mailroom.providers.guarded_http`). ``http`` is
accepted only when every address of the host is a private one the operator
allow-listed in ``MAILROOM_ALLOWED_PRIVATE_HOSTS`` (an internal service on
the operator's own network): events name people's mail, and plain http over
the internet would show them to everyone on the way.

A URL that cannot be used is a :class:`~mailroom.errors.ConfigError` in one
sentence; the same sentence for a blocked host and one that does not
resolve, so the check cannot map the operator's network.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from urllib.parse import SplitResult, urlsplit

from mailroom.errors import ConfigError, ProviderError
from mailroom.providers.netguard import check_host, is_public

__all__ = ["MAX_URL_LENGTH", "check_url"]

MAX_URL_LENGTH = 2000


def _parts(url: str) -> SplitResult:
    if len(url) > MAX_URL_LENGTH:
        raise ConfigError(f"The webhook URL is longer than {MAX_URL_LENGTH} characters.")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError:
        raise ConfigError(f"The webhook URL {url!r} is not a URL.") from None
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ConfigError(f"The webhook URL {url!r} must be an https URL with a host.")
    if parts.username is not None or parts.password is not None or parts.fragment:
        raise ConfigError(f"The webhook URL {url!r} must not carry a user name or a fragment.")
    return parts


def check_url(url: str, allowed_hosts: Iterable[str] = ()) -> str:
    """The URL if it may receive webhooks now; a ConfigError saying why not."""
    parts = _parts(url)
    assert parts.hostname is not None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = check_host(parts.hostname, port, allowed_hosts)
    except ProviderError:
        raise ConfigError(
            f"The webhook host {parts.hostname!r} cannot be used from here (it does not "
            "resolve, or it is a private address the operator has not allow-listed in "
            "MAILROOM_ALLOWED_PRIVATE_HOSTS)."
        ) from None
    if parts.scheme == "http" and any(is_public(ipaddress.ip_address(a)) for a in addresses):
        raise ConfigError(
            f"The webhook URL {url!r} must use https (http is only for allow-listed "
            "internal hosts)."
        )
    return url
