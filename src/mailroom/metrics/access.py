"""Who may scrape: an allow-list of addresses, and an operator token when one is set.

The metrics carry no user data (see the package docstring), but they still
tell an outsider how busy the server is and which parts fail, and the web's
rule is that every page needs a signed-in user. A scraper is no user, so
``/metrics`` has its own gate instead:

* the client's address must be in ``MAILROOM_METRICS_ALLOW`` (addresses or
  networks, comma-separated; default ``127.0.0.1, ::1``), and
* when ``MAILROOM_METRICS_TOKEN`` is set, the request must carry
  ``Authorization: Bearer <token>`` (compared in constant time).

Behind a reverse proxy on the same machine every request comes from loopback
unless the proxy passes ``X-Forwarded-For`` (which uvicorn trusts from
127.0.0.1): set a token there, or do not route ``/metrics`` through the proxy.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass

from mailroom.config import Settings
from mailroom.errors import ConfigError

DEFAULT_ALLOW = "127.0.0.1, ::1"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class ScrapeAccess:
    """The scrape gate of one process."""

    networks: tuple[Network, ...]
    token: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> ScrapeAccess:
        """The gate the operator configured (a ConfigError names a bad entry)."""
        networks = []
        for part in settings.metrics_allow.replace(",", " ").split():
            try:
                networks.append(ipaddress.ip_network(part, strict=False))
            except ValueError:
                raise ConfigError(
                    f"MAILROOM_METRICS_ALLOW: {part!r} is not an address or network "
                    "such as 10.0.0.5 or 10.0.0.0/24."
                ) from None
        token = settings.metrics_token.get_secret_value() if settings.metrics_token else None
        return cls(tuple(networks), token or None)

    def permits(self, address: str | None, authorization: str | None) -> bool:
        """Whether a scrape from ``address`` with this ``Authorization`` header is answered."""
        if not self._allowed(address):
            return False
        if self.token is None:
            return True
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(given.strip().encode(), self.token.encode())

    def _allowed(self, address: str | None) -> bool:
        if not address:
            return False
        try:
            ip = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped  # a dual-stack listener sees IPv4 clients as ::ffff:a.b.c.d
        return any(ip in network for network in self.networks)
