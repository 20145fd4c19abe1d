"""The settings page: inbox tabs, display, rules (with a test on existing mail), API tokens.

========================================  =====================================
``GET  /settings``                        the page
``POST /settings/tabs``                   which tabs are on (``categories_off``;
                                          the inbox is sorted again)
``POST /settings/display``                ``density`` (comfortable/compact),
                                          ``mark_read_on_open`` and ``timezone``
                                          (an IANA name, for the times shown)
``POST /settings/rules``                  adds a rule; ``.../rules/test`` shows the
                                          existing mail it matches, adding nothing
``POST /settings/rules/{id}/remove``      removes one
``POST /settings/tokens``                 creates a token, shown once on the answer
``POST /settings/tokens/{id}/revoke``     revokes one
``/settings/calendar...``                 the events feed's address (``web.pages.calendar``)
========================================  =====================================

Every POST carries the session's CSRF token. Rules are built and stored by
:mod:`mailroom.rules` (the same validation as ``mailroom rules add``); tokens by
:mod:`mailroom.jmap.auth`; the tabs as ``mailroom categories on|off`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any
from zoneinfo import available_timezones

from sqlalchemy import func, select
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from mailroom.categories.correspondents import switched_off
from mailroom.categories.recompute import recategorize
from mailroom.categories.tabs import CATEGORIES, PRIMARY
from mailroom.crypto.message_fields import open_rows
from mailroom.errors import NotFoundError, RuleError
from mailroom.events.feed_tokens import feed_made_at
from mailroom.jmap.auth import create_token, list_tokens, revoke_token
from mailroom.rules import add_rule, list_rules, parse_rule, remove_rule
from mailroom.rules.engine import condition_clauses
from mailroom.rules.model import RuleSpec
from mailroom.store.models import ApiToken, Message, User
from mailroom.store.reader import as_reader
from mailroom.web.pages.common import (
    context,
    page,
    read_form,
    same_token,
    signed_in,
    web_origin,
)
from mailroom.web.pages.layout import DENSITIES, layout, render
from mailroom.web.pages.operators import is_admin
from mailroom.web.prefs import marks_read_on_open
from mailroom.web.sessions import SignedIn

EXPIRED = "The form has expired; reload the page and try again."
UNKNOWN_ZONE = "Choose a time zone from the list."
PREVIEW = 10  # matching messages shown by a rule test
CONDITIONS = ("from", "to", "subject", "list_id", "text")
FLAG_ACTIONS = ("archive", "trash", "mark_read", "star")


@dataclass(frozen=True)
class RuleTest:
    """What a rule would match among the user's mail (newest first, at most PREVIEW)."""

    description: str
    count: int
    subjects: list[str]


@cache
def zone_names() -> tuple[str, ...]:
    """The IANA time zone names a user may choose (``UTC`` first, then sorted)."""
    return ("UTC", *sorted(available_timezones() - {"UTC"}))


def _settings_page(request: Request, user: SignedIn, status: int = 200, **values: Any) -> Response:
    with context(request).store.session() as session:
        frame = layout(as_reader(session), request, user, "settings")
        off = switched_off(session, user.user_id)
        rules = list_rules(session, user.user_id)
        tokens = list_tokens(session, user.name)
        calendar_since = feed_made_at(session, user.user_id)
    prefs = frame.owner.settings
    return render(
        frame,
        "settings.html",
        status,
        tabs=[(tab, tab not in off) for tab in CATEGORIES if tab != PRIMARY],
        density=frame.density,
        densities=DENSITIES,
        mark_read=marks_read_on_open(prefs),
        timezone=str(prefs.get("timezone") or "UTC"),
        zones=zone_names(),
        rules=rules,
        tokens=tokens,
        calendar_since=calendar_since,
        categories=CATEGORIES,
        admin=is_admin(request, user),
        rule_fields=values.pop("rule_fields", {}),
        **values,
    )


@signed_in
def settings_page(request: Request, user: SignedIn) -> Response:
    """GET /settings."""
    notice = {
        "tabs": "The tabs are saved.",
        "display": "The display settings are saved.",
        "rule-added": "The rule was added; it applies to mail that arrives from now on.",
        "rule-removed": "The rule was removed.",
        "token-revoked": "The token was revoked; it stops working at once.",
        "calendar-off": "The calendar feed is off; its address no longer works.",
    }.get(request.query_params.get("done", ""))
    return _settings_page(request, user, notice=notice)


def _form(request: Request, user: SignedIn) -> dict[str, str] | None:
    """The form's fields when its CSRF token is right, else None."""
    form = read_form(request)
    if form is None or not same_token(form.get("csrf"), user.csrf_token):
        return None
    return form


def _done(what: str) -> Response:
    return RedirectResponse(f"/settings?done={what}", status_code=303)


def _expired(user: SignedIn) -> Response:
    return page("missing.html", 403, user=user, message=EXPIRED)


def _user(session: Session, user: SignedIn) -> User:
    row = session.get(User, user.user_id)
    if row is None:
        raise NotFoundError("There is no such user.")
    return row


@signed_in
def save_tabs(request: Request, user: SignedIn) -> Response:
    """POST /settings/tabs: the checked tabs are on, the others off."""
    form = _form(request, user)
    if form is None:
        return _expired(user)
    off = sorted(tab for tab in CATEGORIES if tab != PRIMARY and form.get(f"tab_{tab}") != "on")
    with context(request).store.session() as session:
        row = _user(session, user)
        if sorted(switched_off(session, row.id)) != off:
            row.settings = {**(row.settings or {}), "categories_off": off}
            session.flush()
            recategorize(session, row.id)
    return _done("tabs")


@signed_in
def save_display(request: Request, user: SignedIn) -> Response:
    """POST /settings/display: density, whether opening a thread marks it read, time zone."""
    form = _form(request, user)
    if form is None:
        return _expired(user)
    chosen = form.get("density", "")
    zone = form.get("timezone")  # left as it is when the form has no such field
    if zone is not None and zone not in zone_names():
        return _settings_page(request, user, 400, display_error=UNKNOWN_ZONE)
    with context(request).store.session() as session:
        row = _user(session, user)
        row.settings = {
            **(row.settings or {}),
            "density": chosen if chosen in DENSITIES else DENSITIES[0],
            "mark_read_on_open": form.get("mark_read_on_open") == "on",
            **({} if zone is None else {"timezone": zone}),
        }
    return _done("display")


def rule_from_form(form: dict[str, str]) -> RuleSpec:
    """The rule the form describes, validated as ``mailroom rules add`` does (RuleError)."""
    conditions = {key: form[key].strip() for key in CONDITIONS if form.get(key, "").strip()}
    labels = [part.strip() for part in form.get("labels", "").split(",") if part.strip()]
    actions: list[dict[str, Any]] = [{"type": "label", "label": label} for label in labels]
    actions += [{"type": kind} for kind in FLAG_ACTIONS if form.get(kind) == "on"]
    if form.get("category"):
        actions.append({"type": "category", "category": form["category"]})
    spec = parse_rule(form.get("name", "").strip() or "rule", conditions, actions)
    if not form.get("name", "").strip():
        spec = parse_rule(spec.describe()[:200], conditions, actions)
    return spec


def rule_preview(session: Session, user_id: int, spec: RuleSpec) -> RuleTest:
    """The user's existing messages the rule's conditions match (newest first)."""
    where = [Message.user_id == user_id, *condition_clauses(session, spec.conditions, user_id)]
    found = session.execute(
        select(Message.id, Message.user_id, Message.sealed, Message.subject)
        .where(*where)
        .order_by(Message.id.desc())
        .limit(PREVIEW)
    ).all()
    subjects = [row["subject"] for row in open_rows(session, found, ["subject"])]
    count = session.scalar(select(func.count()).select_from(Message).where(*where)) or 0
    return RuleTest(spec.describe(), count, [s or "(no subject)" for s in subjects])


@signed_in
def add_or_test_rule(request: Request, user: SignedIn) -> Response:
    """POST /settings/rules (add) and /settings/rules/test (show what it would match)."""
    form = _form(request, user)
    if form is None:
        return _expired(user)
    testing = request.url.path.endswith("/test")
    try:
        spec = rule_from_form(form)
    except RuleError as error:
        return _settings_page(request, user, 400, rule_error=str(error), rule_fields=form)
    with context(request).store.session() as session:
        if testing:
            tested = rule_preview(session, user.user_id, spec)
        else:
            add_rule(session, user.user_id, spec)
    if not testing:
        return _done("rule-added")
    return _settings_page(request, user, tested=tested, rule_fields=form)


@signed_in
def drop_rule(request: Request, user: SignedIn) -> Response:
    """POST /settings/rules/{id}/remove."""
    if _form(request, user) is None:
        return _expired(user)
    try:
        with context(request).store.session() as session:
            remove_rule(session, user.user_id, request.path_params["rule_id"])
    except NotFoundError:
        return page("missing.html", 404, user=user, what="rule")
    return _done("rule-removed")


@signed_in
def new_token(request: Request, user: SignedIn) -> Response:
    """POST /settings/tokens: a new API token, shown this once."""
    form = _form(request, user)
    if form is None:
        return _expired(user)
    name = form.get("name", "").strip()[:200] or "web"
    with context(request).store.session() as session:
        token = create_token(session, user.name, name, origin=web_origin(request))
    return _settings_page(request, user, new_token=token, new_token_name=name)


@signed_in
def drop_token(request: Request, user: SignedIn) -> Response:
    """POST /settings/tokens/{id}/revoke: only the user's own tokens."""
    if _form(request, user) is None:
        return _expired(user)
    with context(request).store.session() as session:
        token = session.get(ApiToken, request.path_params["token_id"])
        if token is None or token.user_id != user.user_id:
            return page("missing.html", 404, user=user, what="token")
        revoke_token(session, token.id, web_origin(request))
    return _done("token-revoked")


ROUTES = [
    Route("/settings", settings_page, methods=["GET"]),
    Route("/settings/tabs", save_tabs, methods=["POST"]),
    Route("/settings/display", save_display, methods=["POST"]),
    Route("/settings/rules", add_or_test_rule, methods=["POST"]),
    Route("/settings/rules/test", add_or_test_rule, methods=["POST"]),
    Route("/settings/rules/{rule_id:int}/remove", drop_rule, methods=["POST"]),
    Route("/settings/tokens", new_token, methods=["POST"]),
    Route("/settings/tokens/{token_id:int}/revoke", drop_token, methods=["POST"]),
]
