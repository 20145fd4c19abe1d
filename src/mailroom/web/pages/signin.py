"""``GET/POST /signin`` and ``POST /signout``.

Signing in checks the password through the same :class:`Authenticator` as
JMAP Basic, so the lock-out counts web and JMAP failures together: while a
name or address is locked the form answers 429 "Too many attempts" with
``Retry-After``. A successful sign-in starts a new session (a fresh token,
so a cookie planted before sign-in is worth nothing) and ends the one the
browser had.
"""

from __future__ import annotations

import secrets

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mailroom.jmap.auth import LockedOut
from mailroom.web.pages.common import (
    SESSION_COOKIE,
    SIGNIN_COOKIE,
    client_address,
    context,
    over_tls,
    page,
    read_form,
    safe_next,
    same_token,
    signed_in_user,
)
from mailroom.web.sessions import SignOut, end_session, start_session

SIGNIN_FORM_SECONDS = 3600  # how long a sign-in form stays usable


def _form(
    request: Request,
    *,
    status: int = 200,
    error: str = "",
    name: str = "",
    target: str = "/",
    csrf: str | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    csrf = csrf or secrets.token_urlsafe(32)
    response = page("signin.html", status, headers, error=error, name=name, next=target, csrf=csrf)
    response.set_cookie(
        SIGNIN_COOKIE,
        csrf,
        max_age=SIGNIN_FORM_SECONDS,
        path="/signin",
        secure=over_tls(request),
        httponly=True,
        samesite="lax",
    )
    return response


def signin_form(request: Request) -> Response:
    """GET /signin: the form (or, for a signed-in browser, where it wanted to go)."""
    target = safe_next(request.query_params.get("next"))
    if signed_in_user(request) is not None:
        return RedirectResponse(target, status_code=303)
    return _form(request, target=target)


def signin(request: Request) -> Response:
    """POST /signin: check name and password, start a session, go on."""
    web = context(request)
    fields = read_form(request)
    if fields is None:
        return _form(request, status=400, error="The form could not be read; please try again.")
    target = safe_next(fields.get("next"))
    name, password = fields.get("name", ""), fields.get("password", "")
    cookie = request.cookies.get(SIGNIN_COOKIE)
    if not same_token(fields.get("csrf"), cookie):
        return _form(
            request,
            status=403,
            error="This sign-in form has expired; please sign in again.",
            name=name,
            target=target,
        )
    if not name or not password:
        return _form(
            request,
            status=400,
            error="Give your user name and your password.",
            name=name,
            target=target,
            csrf=cookie,
        )
    try:
        user = web.auth.sign_in(name, password, client_address(request), via="web")
    except LockedOut as locked:
        return _form(
            request,
            status=429,
            error=f"Too many attempts; try again in {locked.minutes} minutes.",
            name=name,
            target=target,
            csrf=cookie,
            headers={"Retry-After": str(locked.retry_after)},
        )
    if user is None:
        return _form(
            request,
            status=401,
            error="The user name or the password is wrong.",
            name=name,
            target=target,
            csrf=cookie,
        )
    previous = signed_in_user(request)
    if previous is not None:
        end_session(web.store, previous.session_id)
    token = start_session(
        web.store,
        user.user_id,
        request.headers.get("user-agent", ""),
        web.session_lifetime,
    )
    response = RedirectResponse(target, status_code=303, headers={"Cache-Control": "no-store"})
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=int(web.session_lifetime.total_seconds()),
        path="/",
        secure=over_tls(request),
        httponly=True,
        samesite="lax",
    )
    response.delete_cookie(SIGNIN_COOKIE, path="/signin")
    return response


def signout(request: Request) -> Response:
    """POST /signout: end this browser's session (CSRF-checked) and show the form."""
    web = context(request)
    fields = read_form(request) or {}
    user = signed_in_user(request)
    response = RedirectResponse("/signin", status_code=303, headers={"Cache-Control": "no-store"})
    if user is not None:
        if not same_token(fields.get("csrf"), user.csrf_token):
            return page(
                "missing.html",
                403,
                message="This sign-out form has expired; reload the page and sign out again.",
            )
        end_session(web.store, user.session_id, SignOut(user, client_address(request)))
    response.delete_cookie(
        SESSION_COOKIE, path="/", secure=over_tls(request), httponly=True, samesite="lax"
    )
    return response
