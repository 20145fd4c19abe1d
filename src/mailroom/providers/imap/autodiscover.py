"""Finding an address's IMAP and SMTP servers: autoconfig files, SRV records, common names.

:func:`discover` tries, in order, and stops at the first that names an IMAP server:

1. the Mozilla ISPDB-style autoconfig file on the domain —
   ``https://autoconfig.<domain>/mail/config-v1.1.xml`` then
   ``https://<domain>/.well-known/autoconfig/mail/config-v1.1.xml``;
2. RFC 6186 SRV records: ``_imaps._tcp`` (implicit TLS) before ``_imap._tcp``
   (STARTTLS), ``_submissions._tcp`` before ``_submission._tcp``; a target of
   ``.`` says the service is not offered;
3. common names: ``imap.<domain>`` then ``mail.<domain>`` (and ``smtp.<domain>``,
   ``mail.<domain>`` for sending) when they resolve.

Every web request goes through the SSRF guard (:mod:`mailroom.providers.netguard`):
the host is resolved and vetted once, the connection goes to the vetted address
(the name is kept for TLS and ``Host``), with a timeout, no redirects and at most
:data:`MAX_BYTES` read. A common name counts only when the guard accepts it.
Nothing found is not an error: the result is a best guess (``imap.<domain>``,
implicit TLS) marked as such, for the owner to check.
"""

from __future__ import annotations

import logging
import ssl
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import dns.exception
import dns.resolver
import httpx

from mailroom.errors import ConfigError
from mailroom.providers.base import ProviderError
from mailroom.providers.netguard import check_host

__all__ = ["MAX_BYTES", "Discovery", "Discoverer", "Server", "discover", "split_address"]

log = logging.getLogger(__name__)

MAX_BYTES: Final = 64 * 1024  # an autoconfig file is a few kilobytes
TIMEOUT: Final = 5.0  # seconds per request or DNS query

# autoconfig socketType -> the IMAP account's and the SMTP settings' TLS modes
_IMAP_TLS: Final = {"ssl": "ssl", "tls": "ssl", "starttls": "starttls", "plain": "none"}
_SMTP_TLS: Final = {"ssl": "tls", "tls": "tls", "starttls": "starttls", "plain": "none"}


@dataclass(frozen=True, slots=True)
class Server:
    """One server found: ``tls`` in the IMAP (ssl/starttls/none) or SMTP (tls/starttls/none)
    account's terms."""

    host: str
    port: int
    tls: str


@dataclass(frozen=True, slots=True)
class Discovery:
    """What was found for an address; ``source`` says how (``guess``: nothing was found)."""

    address: str
    login: str
    imap: Server
    smtp: Server | None
    source: str  # "autoconfig", "srv", "common names" or "guess"

    @property
    def found(self) -> bool:
        """Whether the servers were found rather than guessed."""
        return self.source != "guess"


def split_address(address: str) -> tuple[str, str]:
    """``(local part, domain)`` of an email address; ConfigError if it is not one."""
    local, at, domain = address.strip().rpartition("@")
    domain = domain.strip().lower().rstrip(".")
    if not at or not local or not domain or ("." not in domain and domain != "localhost"):
        raise ConfigError(f"{address.strip()!r} is not an email address, e.g. ann@example.org.")
    if any(ch.isspace() or ch in "/\\?#[]" for ch in domain):
        raise ConfigError(f"{address.strip()!r} is not an email address, e.g. ann@example.org.")
    return local, domain


class Discoverer:
    """The lookups, with what tests change: the allow-list, TLS trust, port and DNS server."""

    def __init__(
        self,
        allowed: Sequence[str] = (),
        *,
        ssl_context: ssl.SSLContext | None = None,
        https_port: int = 443,
        resolver: dns.resolver.Resolver | None = None,
        timeout: float = TIMEOUT,
    ) -> None:
        self.allowed = list(allowed)
        self.ssl_context = ssl_context or ssl.create_default_context()
        self.https_port = https_port
        self.timeout = timeout
        self.resolver = resolver or dns.resolver.Resolver()
        self.resolver.lifetime = timeout

    def discover(self, address: str) -> Discovery:
        """The servers of ``address`` (see the module); ConfigError if it is not an address."""
        local, domain = split_address(address)
        address = f"{local}@{domain}"
        for url in (
            f"autoconfig.{domain}/mail/config-v1.1.xml",
            f"{domain}/.well-known/autoconfig/mail/config-v1.1.xml",
        ):
            found = self._autoconfig(url, address, local, domain)
            if found is not None:
                return found
        imap = self._srv(domain, (("_imaps", "ssl"), ("_imap", "starttls")))
        if imap is not None:
            smtp = self._srv(domain, (("_submissions", "tls"), ("_submission", "starttls")))
            return Discovery(address, address, imap, smtp, "srv")
        imap_host = self._first_public((f"imap.{domain}", f"mail.{domain}"), 993)
        if imap_host is not None:
            smtp_host = self._first_public((f"smtp.{domain}", f"mail.{domain}"), 587)
            smtp = Server(smtp_host, 587, "starttls") if smtp_host else None
            return Discovery(address, address, Server(imap_host, 993, "ssl"), smtp, "common names")
        return Discovery(address, address, Server(f"imap.{domain}", 993, "ssl"), None, "guess")

    # -- autoconfig ---------------------------------------------------------

    def _autoconfig(self, where: str, address: str, local: str, domain: str) -> Discovery | None:
        host, _, path = where.partition("/")
        body = self._fetch(host, f"/{path}", address)
        if body is None:
            return None
        try:
            return parse_autoconfig(body, address, local, domain)
        except ValueError as exc:
            log.info("autoconfig from %s is not usable: %s", host, exc)
            return None

    def _fetch(self, host: str, path: str, address: str) -> bytes | None:
        """The body of ``https://host/path`` (vetted, bounded) or None on any failure."""
        try:
            vetted = check_host(host, self.https_port, self.allowed)
        except ProviderError:
            return None
        port = "" if self.https_port == 443 else f":{self.https_port}"
        for target in vetted:
            netloc = f"[{target}]" if ":" in target else target
            try:
                return self._get(f"https://{netloc}:{self.https_port}{path}", host, port, address)
            except httpx.ConnectError:
                continue  # another vetted address of the name may answer
            except (httpx.HTTPError, ssl.SSLError, OSError) as exc:
                log.info("no autoconfig from %s: %s", host, exc)
                return None
        return None

    def _get(self, url: str, host: str, port: str, address: str) -> bytes | None:
        with (
            httpx.Client(verify=self.ssl_context, timeout=self.timeout) as client,
            client.stream(
                "GET",
                url,
                params={"emailaddress": address},
                headers={"Host": f"{host}{port}", "Accept": "application/xml, text/xml"},
                extensions={"sni_hostname": host},
            ) as response,
        ):
            if response.status_code != 200:  # redirects are not followed
                return None
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > MAX_BYTES:
                    log.info("autoconfig from %s is over %d bytes", host, MAX_BYTES)
                    return None
                chunks.append(chunk)
            return b"".join(chunks)

    # -- SRV and names ------------------------------------------------------

    def _srv(self, domain: str, services: Sequence[tuple[str, str]]) -> Server | None:
        for service, tls in services:
            try:
                answer = self.resolver.resolve(f"{service}._tcp.{domain}", "SRV")
            except (dns.exception.DNSException, OSError):
                continue
            records = sorted(answer, key=lambda r: (r.priority, -r.weight))
            for record in records:
                target = record.target.to_text(omit_final_dot=True)
                if target in ("", "."):
                    break  # RFC 6186 §3.4 (RFC 2782): the service is not offered here
                return Server(target.lower(), int(record.port), tls)
        return None

    def _first_public(self, names: Sequence[str], port: int) -> str | None:
        for name in names:
            try:
                check_host(name, port, self.allowed)
            except ProviderError:
                continue
            return name
        return None


def _text(element: ET.Element, tag: str) -> str:
    found = element.find(tag)
    return (found.text or "").strip() if found is not None else ""


def _server(element: ET.Element | None, modes: dict[str, str], default_port: int) -> Server | None:
    if element is None:
        return None
    host = _text(element, "hostname").lower()
    tls = modes.get(_text(element, "socketType").lower())
    port = _text(element, "port")
    if not host or tls is None or any(ch.isspace() or ch == "/" for ch in host):
        return None
    number = int(port) if port.isdigit() and 0 < int(port) < 65536 else default_port
    return Server(host, number, tls)


def parse_autoconfig(body: bytes, address: str, local: str, domain: str) -> Discovery:
    """Read a ``config-v1.1.xml``; ValueError if it names no usable IMAP server.

    A file with a DOCTYPE is refused (no entities are expanded). The username's
    placeholders ``%EMAILADDRESS%``, ``%EMAILLOCALPART%``, ``%EMAILDOMAIN%`` are filled in.
    """
    if b"<!DOCTYPE" in body.upper() or b"<!ENTITY" in body.upper():
        raise ValueError("a DOCTYPE is not accepted")
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise ValueError(f"not XML: {exc}") from None
    provider = root.find("emailProvider")
    if provider is None:
        raise ValueError("no emailProvider")
    chosen = [
        (server, element)
        for element in provider.findall("incomingServer[@type='imap']")
        if (server := _server(element, _IMAP_TLS, 993)) is not None
    ]
    if not chosen:
        raise ValueError("no IMAP server")
    imap, element = chosen[0]
    outgoing = [
        _server(s, _SMTP_TLS, 587) for s in provider.findall("outgoingServer[@type='smtp']")
    ]
    smtp = next((s for s in outgoing if s is not None and s.tls != "none"), None)
    login = (
        _text(element, "username")
        .replace("%EMAILADDRESS%", address)
        .replace("%EMAILLOCALPART%", local)
        .replace("%EMAILDOMAIN%", domain)
    ) or address
    return Discovery(address, login, imap, smtp, "autoconfig")


def discover(address: str, allowed: Sequence[str] = ()) -> Discovery:
    """The servers of ``address`` with the default lookups (:class:`Discoverer`)."""
    return Discoverer(allowed).discover(address)
