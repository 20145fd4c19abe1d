"""POSTing a form to a token endpoint, through the SSRF guard.

The request goes through :mod:`mailroom.providers.guarded_http` (the host
vetted by the SSRF guard, the name kept for ``Host`` and TLS). Redirects are not
followed. ``https`` is required except for a loopback address, which the guard
lets through only when allow-listed (test servers and emulators).

Failures are provider errors in one sentence: a blocked host is an AuthError,
a name that does not resolve or a connection that fails a TransientError.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

import httpx

from mailroom.errors import ConfigError
from mailroom.providers.base import TransientError
from mailroom.providers.guarded_http import guarded_client, require_https

__all__ = ["DEFAULT_TIMEOUT", "post_form"]

log = logging.getLogger(__name__)
DEFAULT_TIMEOUT = 30.0


def post_form(
    url: str,
    form: Mapping[str, str],
    *,
    allowed_hosts: Iterable[str] = (),
    timeout: float = DEFAULT_TIMEOUT,
) -> httpx.Response:
    """POST ``form`` (urlencoded) to ``url`` on a vetted address; the response, any status."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"The token endpoint {url!r} is not an http(s) URL.")
    require_https(url, "The token endpoint")
    try:
        with guarded_client(allowed_hosts, timeout=timeout) as client:
            return client.post(url, data=dict(form), headers={"Accept": "application/json"})
    except httpx.HTTPError as exc:
        log.info("token endpoint %s did not answer: %s", parts.hostname, exc)
        raise TransientError(
            f"The sign-in server {parts.hostname} could not be reached; try again later.",
            reason=f"token endpoint unreachable: {type(exc).__name__}",
        ) from None
