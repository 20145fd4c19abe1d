"""The accounts page: the user's accounts, their state, adding an IMAP account, disconnecting.

==================================  ============================================
``GET  /accounts``                  each account: status with its reason, watch
                                    state, import progress, last sync, outgoing
                                    server, a Disconnect button
``GET  /accounts/{id}/state``       one account's state (the fragment htmx polls
                                    while it imports)
``POST /accounts/{id}/disconnect``  disconnects it (its mail stays)
``GET  /accounts/add``              the address form; ``POST /accounts/discover``
                                    looks the servers up and fills the full form
``POST /accounts/add``              adds the IMAP account
``/accounts/oauth/...``             connects a Gmail or Microsoft account
                                    (``web.pages.oauth_connect``), offered when
                                    the operator configured its web client
==================================  ============================================

Adding goes through the same code as ``mailroom account add imap``
(:func:`~mailroom.providers.imap.account.add_imap_account`, then the outgoing
server through :mod:`mailroom.cli.smtp_options`); the servers are found by
:mod:`mailroom.providers.imap.autodiscover`, under the operator's allow-list.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from mailroom.cli.accounts import account_reason, outgoing_server
from mailroom.cli.smtp_options import SmtpOptions, resolve_outgoing, save_outgoing
from mailroom.errors import ConfigError
from mailroom.listing import owner
from mailroom.oauth.web import LABELS, web_clients
from mailroom.outbound.smtp_settings import SECURITY_MODES
from mailroom.owners import disconnect_account
from mailroom.providers.facts import importing
from mailroom.providers.imap.account import TLS_MODES, add_imap_account
from mailroom.providers.imap.autodiscover import Discoverer, Discovery
from mailroom.store.models import Account, SyncState
from mailroom.store.reader import as_reader, stamp
from mailroom.web.display import user_zone
from mailroom.web.pages.common import (
    context,
    page,
    read_form,
    same_token,
    signed_in,
    web_origin,
)
from mailroom.web.pages.layout import layout, render
from mailroom.web.pages.operators import is_admin, web_settings
from mailroom.web.sessions import SignedIn

EXPIRED = "The form has expired; reload the page and try again."
POLL_SECONDS = 3  # how often an importing account's state is fetched again

# The fields of the add form, with what an empty form holds.
FORM_FIELDS = {
    "address": "",
    "name": "",
    "host": "",
    "port": "",
    "tls": "ssl",
    "login": "",
    "smtp_host": "",
    "smtp_port": "",
    "smtp_security": "starttls",
    "smtp_login": "",
}


@dataclass(frozen=True)
class AccountView:
    """One account as the page shows it."""

    id: int
    name: str
    provider: str
    status: str
    reason: str
    watch_state: str
    importing: bool
    done: int
    total: int
    last_sync: datetime | None
    outgoing: str | None

    @property
    def percent(self) -> int:
        """How far the import is, 0-100."""
        return min(100, round(100 * self.done / self.total)) if self.total else 0

    @property
    def watching(self) -> str:
        """The watch state in words."""
        if self.watch_state == "watching":
            return "watching for new mail"
        if self.watch_state.startswith("backoff:"):
            return "reconnecting"
        return "not watching"


def account_views(session: Session, user_id: int) -> list[AccountView]:
    """The user's accounts by name, with their last sync (newest sync mark)."""
    synced = (
        select(SyncState.account_id, func.max(SyncState.updated_at).label("at"))
        .group_by(SyncState.account_id)
        .subquery()
    )
    rows = session.execute(
        select(Account, synced.c.at)
        .outerjoin(synced, synced.c.account_id == Account.id)
        .where(Account.user_id == user_id)
        .order_by(Account.name)
    )
    return [_view(account, at) for account, at in rows]


def _view(account: Account, last_sync: datetime | None) -> AccountView:
    return AccountView(
        id=account.id,
        name=account.name,
        provider=account.provider,
        status=account.status,
        reason=account_reason(account.status, account.status_reason, account.watch_state),
        watch_state=account.watch_state,
        importing=importing(account.provider, account.status, account.import_finished_at),
        done=min(account.import_done or 0, account.import_total or 0),
        total=account.import_total or 0,
        last_sync=stamp(last_sync),
        outgoing=outgoing_server(account.settings or {}),
    )


def _own(session: Session, user: SignedIn, account_id: int) -> Account | None:
    account = session.get(Account, account_id)
    return account if account is not None and account.user_id == user.user_id else None


@signed_in
def accounts_page(request: Request, user: SignedIn) -> Response:
    """GET /accounts: the user's accounts."""
    with context(request).store.session() as session:
        frame = layout(as_reader(session), request, user, "accounts")
        views = account_views(session, user.user_id)
    notice = {
        "added": "The account was added; its mail is on the way.",
        "disconnected": "The account was disconnected; its mail stays.",
        "connected": "The account was connected; its mail is on the way.",
    }.get(request.query_params.get("done", ""))
    return render(
        frame,
        "accounts.html",
        accounts=views,
        poll=POLL_SECONDS,
        zone=frame.zone,
        notice=notice,
        admin=is_admin(request, user),
        oauth=[(name, LABELS[name]) for name in web_clients(web_settings(request))],
    )


@signed_in
def account_state(request: Request, user: SignedIn) -> Response:
    """GET /accounts/{id}/state: one account's state, the fragment the page polls."""
    with context(request).store.session() as session:
        views = [
            v
            for v in account_views(session, user.user_id)
            if v.id == request.path_params["account_id"]
        ]
        zone = user_zone(owner(as_reader(session), user.user_id).settings)
    if not views:
        return page("missing.html", 404, user=user, what="account")
    return page("_account.html", account=views[0], user=user, poll=POLL_SECONDS, zone=zone)


@signed_in
def disconnect(request: Request, user: SignedIn) -> Response:
    """POST /accounts/{id}/disconnect: stop syncing, forget the passwords."""
    form = read_form(request) or {}
    if not same_token(form.get("csrf"), user.csrf_token):
        return page("missing.html", 403, user=user, message=EXPIRED)
    with context(request).store.session() as session:
        account = _own(session, user, request.path_params["account_id"])
        if account is None:
            return page("missing.html", 404, user=user, what="account")
        disconnect_account(account, web_origin(request))
    return RedirectResponse("/accounts?done=disconnected", status_code=303)


@signed_in
def add_form(request: Request, user: SignedIn) -> Response:
    """GET /accounts/add: the address form (or, with ``manual``, the whole form)."""
    return _form_page(request, user, dict(FORM_FIELDS), full="manual" in request.query_params)


@signed_in
def discover(request: Request, user: SignedIn) -> Response:
    """POST /accounts/discover: look the address's servers up, show the filled form."""
    form = read_form(request) or {}
    if not same_token(form.get("csrf"), user.csrf_token):
        return _form_page(request, user, dict(FORM_FIELDS), error=EXPIRED, status=403)
    address = form.get("address", "").strip()
    settings = web_settings(request)
    try:
        found = Discoverer(settings.allowed_private_host_list).discover(address)
    except ConfigError as error:
        return _form_page(
            request, user, {**FORM_FIELDS, "address": address}, error=str(error), status=400
        )
    return _form_page(request, user, _filled(found), full=True, found=found)


def _filled(found: Discovery) -> dict[str, str]:
    fields = {
        **FORM_FIELDS,
        "address": found.address,
        "name": found.address,
        "host": found.imap.host,
        "port": str(found.imap.port),
        "tls": found.imap.tls,
        "login": found.login,
    }
    if found.smtp is not None:
        fields.update(
            smtp_host=found.smtp.host,
            smtp_port=str(found.smtp.port),
            smtp_security=found.smtp.tls,
            smtp_login=found.login,
        )
    return fields


@signed_in
def add(request: Request, user: SignedIn) -> Response:
    """POST /accounts/add: add the IMAP account the form describes."""
    form = read_form(request) or {}
    fields = {key: form.get(key, default).strip() for key, default in FORM_FIELDS.items()}
    if not same_token(form.get("csrf"), user.csrf_token):
        return _form_page(request, user, fields, full=True, error=EXPIRED, status=403)
    try:
        _add(request, user, fields, form.get("password", ""), form.get("smtp_password", ""))
    except ConfigError as error:
        return _form_page(request, user, fields, full=True, error=str(error), status=400)
    return RedirectResponse("/accounts?done=added", status_code=303)


def _port(text: str, what: str) -> int | None:
    if not text:
        return None
    if not text.isdigit() or len(text) > 5:
        raise ConfigError(f"The {what} port {text!r} is not a number.")
    return int(text)


def _add(
    request: Request, user: SignedIn, fields: dict[str, str], password: str, smtp_password: str
) -> int:
    settings = web_settings(request)
    store = context(request).store
    outgoing = None
    if fields["smtp_host"]:
        options = SmtpOptions(
            host=fields["smtp_host"],
            port=_port(fields["smtp_port"], "outgoing"),
            security=fields["smtp_security"],
            login=fields["smtp_login"],
        )
        outgoing = resolve_outgoing(
            options,
            current=None,
            password=smtp_password or None,
            default_login=fields["login"],
            can_log_in=True,
        )
    account_id = add_imap_account(
        store,
        settings,
        name=fields["name"] or fields["address"] or fields["login"],
        host=fields["host"],
        port=_port(fields["port"], "IMAP"),
        tls=fields["tls"],
        login=fields["login"],
        password=password,
        owner=user.name,
        origin=web_origin(request),
    )
    if outgoing is not None:
        save_outgoing(store, settings, account_id, outgoing, smtp_password or None)
    return account_id


def _form_page(
    request: Request,
    user: SignedIn,
    fields: dict[str, str],
    *,
    full: bool = False,
    found: Discovery | None = None,
    error: str | None = None,
    status: int = 200,
) -> Response:
    with context(request).store.session() as session:
        frame = layout(as_reader(session), request, user, "accounts")
    return render(
        frame,
        "account_add.html",
        status,
        fields=fields,
        full=full,
        found=found,
        error=error,
        tls_modes=TLS_MODES,
        security_modes=SECURITY_MODES,
    )


ROUTES = [
    Route("/accounts", accounts_page, methods=["GET"]),
    Route("/accounts/add", add_form, methods=["GET"]),
    Route("/accounts/add", add, methods=["POST"]),
    Route("/accounts/discover", discover, methods=["POST"]),
    Route("/accounts/{account_id:int}/state", account_state, methods=["GET"]),
    Route("/accounts/{account_id:int}/disconnect", disconnect, methods=["POST"]),
]
