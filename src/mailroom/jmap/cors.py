"""Which web pages may talk to the JMAP endpoints: the ``Origin`` rule and CORS.

A browser that holds a user's Basic credentials sends them with requests
that any other site's page makes to this server, so a request that names an
``Origin`` other than the server's own is refused (403) before anything
else happens — on the server, not only by the browser's CORS check, because
a "simple" request (a form post, a GET) is sent without asking first.

Origins the operator lists in ``MAILROOM_CORS_ORIGINS`` (web JMAP clients
served from elsewhere) are let in and answered with CORS headers, including
the preflight ``OPTIONS``. ``Access-Control-Allow-Credentials`` is never
sent: such a client sends its own ``Authorization`` header (a token), and
the browser therefore never attaches the Basic credentials it remembers.

Requests without ``Origin`` (JMAP clients that are not browsers, and
same-origin navigations) are not affected.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from mailroom.jmap.errors import Problem

Endpoint = Callable[[Request], Awaitable[Response]]

ALLOW_HEADERS = "Authorization, Content-Type, Accept, Last-Event-ID"
PREFLIGHT_MAX_AGE = "600"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalize_origin(value: str) -> str | None:
    """``scheme://host[:port]`` in lower case without a default port; None if not an origin."""
    try:
        parts = urlsplit(value.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in _DEFAULT_PORTS or not host or parts.path not in ("", "/"):
        return None
    if parts.query or parts.fragment or parts.username or parts.password:
        return None
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    if port is None or port == _DEFAULT_PORTS[scheme]:
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def parse_origins(values: Iterable[str]) -> frozenset[str]:
    """The operator's allow-list, normalized; entries that are not origins are dropped."""
    return frozenset(o for o in (normalize_origin(v) for v in values if v.strip()) if o)


class OriginPolicy:
    """The Origin rule for the JMAP endpoints, with CORS for the allow-listed origins."""

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self.allowed = parse_origins(allowed)

    @staticmethod
    def own_origin(request: Request) -> str | None:
        """The origin the client reached: the scheme and the Host it used."""
        return normalize_origin(f"{request.url.scheme}://{request.url.netloc}")

    def cross_origin(self, request: Request) -> str | None | Response:
        """None for no Origin or the server's own; the allow-listed origin; or the 403."""
        given = request.headers.get("origin")
        if given is None:
            return None
        origin = normalize_origin(given)
        if origin is not None and origin == self.own_origin(request):
            return None
        if origin is not None and origin in self.allowed:
            return origin
        shown = given if len(given) <= 100 else given[:97] + "..."
        return Problem(
            "about:blank",
            403,
            f"Requests from the web page at Origin {shown!r} are refused: only this server's "
            "own pages and the origins in MAILROOM_CORS_ORIGINS may use JMAP here.",
        ).response(headers={"Vary": "Origin"})

    def guard(self, endpoint: Endpoint, methods: Iterable[str]) -> Endpoint:
        """``endpoint`` behind the Origin rule; OPTIONS answers the CORS preflight."""
        allow_methods = ", ".join(sorted({*methods, "OPTIONS"}))

        async def guarded(request: Request) -> Response:
            origin = self.cross_origin(request)
            if isinstance(origin, Response):
                return origin
            if request.method == "OPTIONS":
                response = Response(status_code=204, headers={"Allow": allow_methods})
                if origin is not None:
                    response.headers["Access-Control-Allow-Origin"] = origin
                    response.headers["Access-Control-Allow-Methods"] = allow_methods
                    response.headers["Access-Control-Allow-Headers"] = ALLOW_HEADERS
                    response.headers["Access-Control-Max-Age"] = PREFLIGHT_MAX_AGE
            else:
                response = await endpoint(request)
                if origin is not None:
                    response.headers["Access-Control-Allow-Origin"] = origin
            # Answers differ by Origin: caches must not hand one origin's to another.
            vary = response.headers.get("Vary")
            response.headers["Vary"] = f"{vary}, Origin" if vary else "Origin"
            return response

        return guarded
