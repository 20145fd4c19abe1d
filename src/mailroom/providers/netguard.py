"""The SSRF guard: a mail server an account names must be on the public internet.

An account owner types a host name; mailroom connects to it from inside the
operator's network. Without a guard, ``--host 127.0.0.1 --port 6379`` would let
an owner poke at the operator's Redis, metadata services or intranet. So:

* the host is resolved once, here, and every address it resolves to must be a
  public (globally routable, unicast) address — loopback, private (RFC 1918,
  ULA), link-local, carrier-grade NAT, multicast, reserved and unspecified
  addresses are refused, IPv4-mapped IPv6 addresses are judged as IPv4;
* unless the operator allow-lists it in ``MAILROOM_ALLOWED_PRIVATE_HOSTS`` (an
  environment setting, never a per-account value): an entry is a host name
  (matched case-insensitively against the configured name), an address or a
  network (``10.0.0.0/8``) that every resolved address must be in;
* the connection then goes to the vetted address (the name is still used for
  TLS), so a second, different DNS answer cannot slip past the check.

The owner learns only that the host "cannot be used" — the same sentence for a
blocked host and for a name that does not resolve, so the guard cannot be used
to map the operator's network. The detail goes to the operator log
(``mailroom.operator``). A blocked host is an :class:`AuthError` (retrying will
not help; the owner must change the account), a DNS failure a
:class:`TransientError` (the name may resolve later).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Iterable, Sequence

from mailroom.providers.base import AuthError, TransientError

__all__ = ["BlockedHostError", "UnresolvableHostError", "check_host", "is_public", "unreachable"]

operator_log = logging.getLogger("mailroom.operator")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class BlockedHostError(AuthError):
    """The host resolves to a non-public address and is not allow-listed."""

    reason = (
        "host cannot be used: not allowed (private address); ask the operator to "
        "allow-list it in MAILROOM_ALLOWED_PRIVATE_HOSTS"
    )


class UnresolvableHostError(TransientError):
    """The host name does not resolve (now)."""

    reason = "cannot connect: name does not resolve"


def unreachable(host: str) -> str:
    """The one sentence an owner sees for a blocked or unresolvable host."""
    return (
        f"The mail server {host!r} cannot be used from here; check the host name, "
        "or ask the operator if it is an internal server."
    )


def is_public(address: IPAddress) -> bool:
    """Whether an address is a public unicast address (IPv4-mapped IPv6 judged as IPv4)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return bool(address.is_global) and not address.is_multicast


def _allowed(host: str, address: IPAddress, allowed: Sequence[str]) -> bool:
    for entry in allowed:
        entry = entry.strip()
        if not entry:
            continue
        if entry.lower().rstrip(".") == host.lower().rstrip("."):
            return True
        try:
            network = ipaddress.ip_network(entry, strict=False)
        except ValueError:
            continue
        candidates = [address]
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            candidates.append(address.ipv4_mapped)
        if any(c.version == network.version and c in network for c in candidates):
            return True
    return False


def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        operator_log.warning("SSRF guard: %r does not resolve: %s", host, exc)
        raise UnresolvableHostError(unreachable(host)) from None
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        text = str(sockaddr[0]).split("%", 1)[0]  # drop an IPv6 zone id
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            continue
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        operator_log.warning("SSRF guard: %r resolved to no usable address", host)
        raise UnresolvableHostError(unreachable(host))
    return addresses


def check_host(host: str, port: int, allowed: Iterable[str] = ()) -> list[str]:
    """Resolve ``host`` and return its vetted addresses, or raise.

    Raises :class:`BlockedHostError` when any address is not public and the host is
    not allow-listed, :class:`UnresolvableHostError` when the name does not resolve.
    Both carry the same sentence (:func:`unreachable`).
    """
    allow = list(allowed)
    addresses = _resolve(host, port)
    blocked = [a for a in addresses if not is_public(a) and not _allowed(host, a, allow)]
    if blocked:
        operator_log.warning(
            "SSRF guard: refused %r (port %d): it resolves to non-public %s; allow it with "
            "MAILROOM_ALLOWED_PRIVATE_HOSTS if it is a trusted internal server",
            host,
            port,
            ", ".join(str(a) for a in blocked),
        )
        raise BlockedHostError(unreachable(host))
    return [str(a) for a in addresses]
