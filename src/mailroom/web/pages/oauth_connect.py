"""Connecting a Gmail or Microsoft account from the accounts page (OAuth in the browser).

======================================  =========================================
``GET  /accounts/oauth/{provider}``     the form: account name and address
                                        (``?reconnect=NAME``: that account's, to
                                        sign it in again after ``auth_error``)
``POST /accounts/oauth/{provider}``     checks them, then a redirect to the
                                        provider's sign-in (PKCE, signed state)
``GET  /accounts/oauth/callback``       where the provider sends the browser back:
                                        the code is exchanged, the account stored
======================================  =========================================

``provider`` is ``gmail`` or ``microsoft``, offered when the operator configured
its web client (:func:`mailroom.oauth.web.web_clients`). The flow itself is
:mod:`mailroom.oauth.web`; between the redirect and the callback the browser
keeps the sealed pending flow in an HttpOnly, ``SameSite=Lax`` cookie (the
callback is a top-level navigation from the provider, which Lax lets through),
scoped to ``/accounts/oauth`` and gone after ten minutes or the callback. A
failure is shown on the form as one sentence.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from mailroom.errors import MailroomError
from mailroom.oauth.web import (
    CALLBACK_PATH,
    FLOW_SECONDS,
    LABELS,
    finish_web_flow,
    own_account,
    start_web_flow,
    web_clients,
)
from mailroom.store.reader import as_reader
from mailroom.web.pages.common import (
    context,
    over_tls,
    page,
    read_form,
    same_token,
    signed_in,
    web_origin,
)
from mailroom.web.pages.layout import layout, render
from mailroom.web.pages.operators import web_settings
from mailroom.web.sessions import SignedIn

COOKIE = "mailroom_oauth"
COOKIE_PATH = "/accounts/oauth"
EXPIRED = "The form has expired; reload the page and try again."


def _form_page(
    request: Request,
    user: SignedIn,
    provider: str | None,
    status: int = 200,
    error: str | None = None,
    fields: dict[str, str] | None = None,
    reconnect: bool = False,
) -> Response:
    with context(request).store.session() as session:
        frame = layout(as_reader(session), request, user, "accounts")
    return render(
        frame,
        "account_oauth.html",
        status,
        provider=provider,
        label=LABELS.get(provider or "", ""),
        providers=[(name, LABELS[name]) for name in web_clients(web_settings(request))],
        error=error,
        fields=fields or {"name": "", "address": ""},
        reconnect=reconnect,
    )


def _unknown(user: SignedIn) -> Response:
    return page("missing.html", 404, user=user, what="way to connect such an account")


@signed_in
def connect_form(request: Request, user: SignedIn) -> Response:
    """GET /accounts/oauth/{provider}: the name and address of the account to connect."""
    provider = request.path_params["provider"]
    if provider not in web_clients(web_settings(request)):
        return _unknown(user)
    again = request.query_params.get("reconnect")
    if again is None:
        return _form_page(request, user, provider)
    try:
        account = own_account(context(request).store, user.name, again, provider)
    except MailroomError as error:
        return _form_page(request, user, provider, 404, str(error))
    address = str((account.settings or {}).get("address") or "")
    fields = {"name": account.name, "address": address}
    return _form_page(request, user, provider, fields=fields, reconnect=True)


@signed_in
def connect_start(request: Request, user: SignedIn) -> Response:
    """POST /accounts/oauth/{provider}: check, then send the browser to the provider."""
    settings = web_settings(request)
    client = web_clients(settings).get(request.path_params["provider"])
    if client is None:
        return _unknown(user)
    form = read_form(request)
    if form is None or not same_token(form.get("csrf"), user.csrf_token):
        return page("missing.html", 403, user=user, message=EXPIRED)
    fields = {"name": form.get("name", "")[:200], "address": form.get("address", "")[:320]}
    again = form.get("reconnect") == "1"
    try:
        url, cookie = start_web_flow(
            context(request).store,
            settings,
            client,
            owner=user.name,
            name=fields["name"],
            address=fields["address"],
            redirect_uri=str(request.base_url).rstrip("/") + CALLBACK_PATH,
            session_key=user.csrf_token,
            reconnect=again,
        )
    except MailroomError as error:
        return _form_page(request, user, client.provider, 400, str(error), fields, again)
    response = RedirectResponse(url, status_code=303)
    response.set_cookie(
        COOKIE,
        cookie,
        max_age=FLOW_SECONDS,
        path=COOKIE_PATH,
        secure=over_tls(request),
        httponly=True,
        samesite="lax",
    )
    return response


@signed_in
def connect_callback(request: Request, user: SignedIn) -> Response:
    """GET /accounts/oauth/callback: exchange the code and store the account."""
    settings = web_settings(request)
    clients = web_clients(settings)
    answer = {key: request.query_params.get(key, "") for key in _ANSWER}
    try:
        provider, _ = finish_web_flow(
            context(request).store,
            settings,
            clients,
            cookie=request.cookies.get(COOKIE),
            answer=answer,
            owner=user.name,
            session_key=user.csrf_token,
            origin=web_origin(request),
        )
        response: Response = RedirectResponse("/accounts?done=connected", status_code=303)
    except MailroomError as error:  # the sentence, and the ways to start again
        response = _form_page(request, user, None, 400, str(error))
    response.delete_cookie(COOKIE, path=COOKIE_PATH, secure=over_tls(request), httponly=True)
    return response


_ANSWER = ("code", "state", "error", "error_description")


ROUTES = [
    # The callback before the {provider} routes: "callback" is not a provider.
    Route(CALLBACK_PATH, connect_callback, methods=["GET"]),
    Route("/accounts/oauth/{provider}", connect_form, methods=["GET"]),
    Route("/accounts/oauth/{provider}", connect_start, methods=["POST"]),
]
