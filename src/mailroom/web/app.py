"""The HTTP application: ``/health``, sign-in, the signed-in user's mail, and JMAP.

=============================  ==============================================
``GET  /health``               open: the process answers (liveness, no store access)
``GET  /ready``                open: database, Redis and schema ready, else 503
``GET  /metrics``              Prometheus text format, for the scrapers that
                               ``mailroom.metrics.access`` lets in (403 for others)
``GET  /signin``               the sign-in form; ``POST /signin`` signs in
``POST /signout``              ends this browser's session
``GET  /``                     the Inbox (``?tab=``), ``/mail/{box}`` the other
                               sidebar boxes, ``/label/{id}`` a user label
``GET  /search?q=``            the threads matching a search (``searching``)
``GET  /threads/{id}``         one thread of theirs (``web.pages.thread``: its
                               message frames, attachments, remote images)
``GET  /threads/{id}/draft``   a Drafts row: to its draft's compose form (``drafts``)
``POST /actions``, ``/undo``   an action on threads and its undo (``web.pages.actions``)
``/compose...``                compose, reply, forward, drafts, Send and Undo
                               (``web.pages.compose``)
``GET  /fragments/sidebar``    the sidebar with fresh counts, for live updates
                               (``web.pages.live``; the push stream takes the cookie)
``/accounts``, ``/settings``   accounts, settings and, for operators, ``/admin``
                               (``web.pages.accounts``, ``settings``, ``admin``)
``GET  /calendar/{token}.ics``  open, the token is the secret: the events feed
                               (``web.pages.calendar``; its address in the settings)
``/static/...``                scripts, styles and the vendored htmx (open)
``/.well-known/jmap``, ``/jmap/...``  JMAP (``mailroom.jmap.app``)
=============================  ==============================================

Pages are plain ``def`` endpoints in ``web.pages`` (Starlette runs them in
its thread pool). A page request without a live session redirects to
``/signin``; the page never creates a user. The web sign-in and JMAP Basic
share one :class:`Authenticator`, so they share the lock-out too.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from mailroom.config import Settings
from mailroom.crypto.datakeys import KeyGone
from mailroom.crypto.fields import FieldTampered
from mailroom.errors import ConfigError
from mailroom.jmap.app import JmapConfig, jmap_routes
from mailroom.jmap.auth import Authenticator, SignInLimiter, lockout_policy
from mailroom.jmap.push_delivery import delivery_lifespan
from mailroom.metrics.endpoint import HttpMetrics, metrics
from mailroom.store.engine import Store
from mailroom.web.pages import accounts, admin, oauth_connect
from mailroom.web.pages import calendar as calendar_pages
from mailroom.web.pages import settings as settings_pages
from mailroom.web.pages.actions import act, undo
from mailroom.web.pages.common import WebContext, page
from mailroom.web.pages.compose import compose_page, compose_post, sent_page, undo_send
from mailroom.web.pages.drafts import open_draft
from mailroom.web.pages.health import health, ready
from mailroom.web.pages.live import session_user, sidebar
from mailroom.web.pages.mailbox import box, inbox, label
from mailroom.web.pages.search import search
from mailroom.web.pages.signin import signin, signin_form, signout
from mailroom.web.pages.thread import (
    allow_sender_images,
    attachment,
    message_html,
    thread_page,
    thread_why,
)
from mailroom.web.sessions import DEFAULT_LIFETIME

STATIC = Path(__file__).parent / "static"


async def _unreadable(_request: Request, error: Exception) -> Response:
    """A page saying, in one sentence, why a sealed message could not be read."""
    return page("missing.html", 422, message=str(error))


def create_app(
    store: Store,
    jmap: JmapConfig | None = None,
    *,
    settings: Settings | None = None,
    auth: Authenticator | None = None,
) -> Starlette:
    """The web application over ``store``: the page for whoever signs in, and JMAP."""
    if auth is None:
        policy = lockout_policy(settings) if settings is not None else None
        auth = Authenticator(store, SignInLimiter(store, policy))
    lifetime = (
        timedelta(days=max(1, settings.web_session_days))
        if settings is not None
        else DEFAULT_LIFETIME
    )
    app = Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/ready", ready, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/signin", signin_form, methods=["GET"]),
            Route("/signin", signin, methods=["POST"]),
            Route("/signout", signout, methods=["POST"]),
            Route("/", inbox, methods=["GET"]),
            Route("/mail/{box}", box, methods=["GET"]),
            Route("/label/{label_id:int}", label, methods=["GET"]),
            Route("/search", search, methods=["GET"]),
            Route("/threads/{thread_id:int}", thread_page, methods=["GET"]),
            Route("/threads/{thread_id:int}/why", thread_why, methods=["GET"]),
            Route("/threads/{thread_id:int}/draft", open_draft, methods=["GET"]),
            Route("/messages/{message_id:int}/html", message_html, methods=["GET"]),
            Route("/compose", compose_page, methods=["GET"]),
            Route("/compose", compose_post, methods=["POST"]),
            Route("/compose/sent/{submission_id:int}", sent_page, methods=["GET"]),
            Route("/compose/sent/{submission_id:int}/undo", undo_send, methods=["POST"]),
            Route("/messages/{message_id:int}/parts/{part}", attachment, methods=["GET"]),
            Route("/senders/images", allow_sender_images, methods=["POST"]),
            Route("/actions", act, methods=["POST"]),
            Route("/undo", undo, methods=["POST"]),
            Route("/fragments/sidebar", sidebar, methods=["GET"]),
            *oauth_connect.ROUTES,
            *accounts.ROUTES,
            *settings_pages.ROUTES,
            *calendar_pages.ROUTES,
            *admin.ROUTES,
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
            *jmap_routes(store, jmap, auth, cookie_user=session_user),
        ],
        lifespan=delivery_lifespan(store, jmap or JmapConfig()),
        middleware=[Middleware(HttpMetrics)],  # HTTP answers by status, for /metrics
        # Sealed mail that does not open (moved, changed, key gone, or no key configured,
        # a ConfigError): its sentence, not a 500.
        exception_handlers={
            FieldTampered: _unreadable,
            KeyGone: _unreadable,
            ConfigError: _unreadable,
        },
    )
    app.state.settings = settings  # the accounts and admin pages (None: the environment's)
    app.state.web = WebContext(
        store=store,
        auth=auth,
        session_lifetime=lifetime,
        submission=(jmap or JmapConfig()).submission,
    )
    return app
