"""What every page shares: templates, headers, the signed-in guard and form reading.

Every page except ``/health`` and the sign-in form needs a signed-in user:
without a live session cookie a request is redirected (303) to
``/signin?next=<where it wanted to go>``. Forms are CSRF-checked: the
sign-in form by a random value in both a short-lived cookie and a hidden
field (an attacker's page can set neither), every later form by the
session's own CSRF token.
"""

from __future__ import annotations

import functools
import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import anyio.from_thread
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from mailroom import __version__
from mailroom.audit import Origin
from mailroom.jmap.auth import Authenticator
from mailroom.jmap.submission_policy import SubmissionPolicy
from mailroom.store.engine import Store
from mailroom.web import display
from mailroom.web.sessions import SignedIn, find_session

SESSION_COOKIE = "mailroom_session"
SIGNIN_COOKIE = "mailroom_signin"
FORM_LIMIT = 16 * 1024  # bytes; a sign-in or sign-out form is far smaller
# Scripts and styles only from /static/ (no inline ones anywhere); the sandboxed
# message frame is served with a CSP of its own (``web.frame.FRAME_CSP``).
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)

_templates = Environment(
    loader=FileSystemLoader(Path(__file__).parent.parent / "templates"),
    autoescape=select_autoescape(default=True),
)
_templates.filters.update(
    short_time=display.short_time, full_time=display.full_time, sender_names=display.sender_names
)


@dataclass(frozen=True)
class WebContext:
    """What the pages need, kept on ``app.state.web``."""

    store: Store
    auth: Authenticator
    session_lifetime: timedelta
    # Sending from the compose page: the settings, JMAP's undo window and limits.
    submission: SubmissionPolicy = field(default_factory=SubmissionPolicy)


def context(request: Request) -> WebContext:
    """The web context of the application serving ``request``."""
    web: WebContext = request.app.state.web
    return web


def page(
    template: str, status: int = 200, headers: dict[str, str] | None = None, **values: Any
) -> HTMLResponse:
    """A rendered template with the page headers (strict CSP, never cached)."""
    body = _templates.get_template(template).render(version=__version__, **values)
    return HTMLResponse(
        body,
        status_code=status,
        headers={
            "Content-Security-Policy": CSP,
            "Cache-Control": "no-store",
            "Referrer-Policy": "no-referrer",
            "X-Content-Type-Options": "nosniff",
            **(headers or {}),
        },
    )


def over_tls(request: Request) -> bool:
    """Whether the browser reached us over https (cookies are then Secure)."""
    return request.url.scheme == "https"


def client_address(request: Request) -> str | None:
    """The client's address as the server saw it (after trusted proxy headers)."""
    return request.client.host if request.client else None


def web_origin(request: Request) -> Origin:
    """Where an action of this request came from, for the audit log: the web, this client."""
    return Origin.network("web", client_address(request))


def safe_next(target: str | None) -> str:
    """``target`` if it is a path on this site, else ``/`` (no open redirect)."""
    if not target or not target.startswith("/") or target.startswith("//"):
        return "/"
    if "\\" in target or any(ord(char) < 0x20 for char in target):
        return "/"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or parts.path.startswith(("/signin", "/signout")):
        return "/"
    return target


def signed_in_user(request: Request) -> SignedIn | None:
    """The user whose live session cookie came with ``request``, or None."""
    return find_session(context(request).store, request.cookies.get(SESSION_COOKIE))


def to_signin(request: Request) -> Response:
    """The redirect to the sign-in form, remembering where the browser wanted to go."""
    wanted = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    target = "/signin" if wanted == "/" else f"/signin?next={quote(wanted, safe='')}"
    return RedirectResponse(target, status_code=303, headers={"Cache-Control": "no-store"})


def signed_in(
    handler: Callable[[Request, SignedIn], Response],
) -> Callable[[Request], Response]:
    """Wrap a page so it runs only for a signed-in user; others go to /signin."""

    @functools.wraps(handler)
    def endpoint(request: Request) -> Response:
        user = signed_in_user(request)
        if user is None:
            return to_signin(request)
        return handler(request, user)

    return endpoint


def same_token(given: str | None, expected: str | None) -> bool:
    """Whether a form's CSRF token matches the expected one (constant time)."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


async def _read_body(request: Request, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
    except ClientDisconnect:
        return None
    return b"".join(chunks)


def read_form(request: Request) -> dict[str, str] | None:
    """The fields of a url-encoded form body (first value each); None if unreadable.

    Called from a plain ``def`` endpoint: the body is read on the event loop
    through ``anyio.from_thread``, so the worker thread only waits for it.
    """
    fields = read_form_lists(request)
    return None if fields is None else {key: values[0] for key, values in fields.items()}


def read_form_lists(
    request: Request, limit: int = FORM_LIMIT, max_fields: int = 20
) -> dict[str, list[str]] | None:
    """Every value of every field of a url-encoded form body; None if unreadable
    (another content type, over ``limit`` bytes or ``max_fields`` fields, not UTF-8)."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/x-www-form-urlencoded":
        return None
    body = anyio.from_thread.run(_read_body, request, limit)
    if body is None:
        return None
    try:
        return parse_qs(
            body.decode("utf-8"),
            keep_blank_values=True,
            strict_parsing=False,
            max_num_fields=max_fields,
        )
    except (UnicodeDecodeError, ValueError):
        return None
