"""Where and how push subscriptions may be delivered (RFC 8620 §7.2), set by the operator.

A subscription URL must be ``https`` (``allow_http`` is for tests on
loopback) and pass the SSRF guard (``providers.netguard``): it must resolve to
public addresses only, unless the host is in ``allowed_private_hosts``
(``MAILROOM_ALLOWED_PRIVATE_HOSTS``, the same allow-list as mail servers).
The guard runs when a subscription is created and again before every POST,
and the POST goes to the address it vetted.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import SplitResult, urlsplit

from mailroom.providers.base import AuthError, TransientError
from mailroom.providers.netguard import check_host

MAX_URL_LENGTH = 4096


class UnusableUrl(ValueError):
    """The URL cannot be a push subscription's (the message says why)."""


class UnresolvableUrl(UnusableUrl):
    """The URL's host does not resolve now (it may later: a delivery retries)."""


@dataclass(frozen=True, slots=True)
class PushPolicy:
    """The operator's rules for push subscriptions and their delivery."""

    allow_http: bool = False
    allowed_private_hosts: tuple[str, ...] = ()
    max_lifetime: timedelta = timedelta(days=7)  # a longer or missing expires is shortened
    max_per_user: int = 50
    ttl: int = 86400  # seconds a push service may keep an undelivered message (TTL header)
    timeout: float = 10.0  # seconds per POST
    attempts: int = 6  # tries per message before it is dropped
    retry_base: float = 1.0  # seconds before the first retry; doubles each time
    retry_most: float = 300.0  # the longest wait between tries

    def parse(self, url: str) -> SplitResult:
        """The URL split, if its form is allowed; :class:`UnusableUrl` otherwise."""
        if len(url) > MAX_URL_LENGTH:
            raise UnusableUrl(f"The url is longer than {MAX_URL_LENGTH} characters.")
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            raise UnusableUrl("The url is not a URL.") from None
        schemes = ("https", "http") if self.allow_http else ("https",)
        if parts.scheme not in schemes or not parts.hostname:
            raise UnusableUrl("The url must be an https URL with a host.")
        if parts.username is not None or parts.fragment:
            raise UnusableUrl("The url must not carry credentials or a fragment.")
        del port
        return parts

    def vet(self, url: str) -> tuple[SplitResult, str]:
        """The URL and the vetted address to connect to; :class:`UnusableUrl` if refused."""
        parts = self.parse(url)
        assert parts.hostname is not None
        port = parts.port or (443 if parts.scheme == "https" else 80)
        why = (
            "The url's host cannot be used from this server (it does not resolve, or "
            "resolves to a private address)."
        )
        try:
            addresses = check_host(parts.hostname, port, self.allowed_private_hosts)
        except AuthError:
            raise UnusableUrl(why) from None
        except TransientError:
            raise UnresolvableUrl(why) from None
        return parts, addresses[0]
