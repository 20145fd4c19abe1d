"""POSTing a form to a token endpoint, through the SSRF guard.

The token URL's host is vetted by :func:`mailroom.providers.netguard.check_host`
(public addresses only, unless the operator allow-lists the host), and the
request goes to a vetted address with the original name as ``Host`` and as the
TLS server name, so a second DNS answer cannot redirect it. Redirects are not
followed. ``https`` is required except for a loopback address, which the guard
lets through only when allow-listed (test servers and emulators).

Failures are provider errors in one sentence: a blocked host is an AuthError,
a name that does not resolve or a connection that fails a TransientError.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit, urlunsplit

import httpx

from mailroom.errors import ConfigError
from mailroom.providers.base import TransientError
from mailroom.providers.netguard import check_host

__all__ = ["DEFAULT_TIMEOUT", "post_form"]

log = logging.getLogger(__name__)
DEFAULT_TIMEOUT = 30.0


def _is_loopback(address: str) -> bool:
    return ipaddress.ip_address(address).is_loopback


def post_form(
    url: str,
    form: Mapping[str, str],
    *,
    allowed_hosts: Iterable[str] = (),
    timeout: float = DEFAULT_TIMEOUT,
) -> httpx.Response:
    """POST ``form`` (urlencoded) to ``url`` on a vetted address; the response, any status."""
    parts = urlsplit(url)
    host = parts.hostname
    if parts.scheme not in ("http", "https") or not host:
        raise ConfigError(f"The token endpoint {url!r} is not an http(s) URL.")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    addresses = check_host(host, port, allowed_hosts)
    if parts.scheme == "http" and not all(_is_loopback(a) for a in addresses):
        raise ConfigError(f"The token endpoint {url!r} must use https.")
    shown_port = "" if parts.port is None else f":{parts.port}"
    last: Exception | None = None
    for address in addresses:
        netloc = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
        target = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
        try:
            with httpx.Client(timeout=timeout, follow_redirects=False) as client:
                return client.post(
                    target,
                    data=dict(form),
                    headers={"Host": f"{host}{shown_port}", "Accept": "application/json"},
                    extensions={"sni_hostname": host},
                )
        except httpx.ConnectError as exc:
            last = exc  # another vetted address of the name may answer
        except httpx.HTTPError as exc:
            last = exc
            break
    log.info("token endpoint %s did not answer: %s", host, last)
    raise TransientError(
        f"The sign-in server {host} could not be reached; try again later.",
        reason=f"token endpoint unreachable: {type(last).__name__}",
    )
