"""The calendar feed of events found in mail, and its secret address on the settings page.

=================================  =========================================
``GET  /calendar/{token}.ics``     open (the token is the credential): the
                                   user's events as iCalendar (``events.feed``)
``POST /settings/calendar``        a new feed address, shown once; the
                                   previous one stops working
``POST /settings/calendar/off``    the feed is switched off
=================================  =========================================

The feed answers an unknown or old token with a plain 404 that says nothing
about users. Its address is shown only on the answer to the POST that made it
(only its hash is stored), with the server's own scheme and host.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from mailroom.events.feed import calendar_feed
from mailroom.events.feed_tokens import drop_feed, feed_path, feed_user, new_feed_token
from mailroom.store.reader import as_reader
from mailroom.web.pages.common import context, page, read_form, same_token, signed_in
from mailroom.web.pages.layout import layout, render
from mailroom.web.sessions import SignedIn

EXPIRED = "The form has expired; reload the page and try again."
FEED_HEADERS = {
    "Cache-Control": "private, max-age=300",
    "Content-Disposition": 'inline; filename="mailroom-events.ics"',
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


def feed(request: Request) -> Response:
    """GET /calendar/{token}.ics: the events feed of the token's user."""
    with context(request).store.session() as session:
        user_id = feed_user(session, request.path_params["token"])
        body = calendar_feed(session, user_id) if user_id is not None else None
    if body is None:
        return PlainTextResponse("No such calendar.", status_code=404)
    return Response(body, media_type="text/calendar; charset=utf-8", headers=FEED_HEADERS)


@signed_in
def new_address(request: Request, user: SignedIn) -> Response:
    """POST /settings/calendar: make a new feed address and show it this once."""
    if not _checked(request, user):
        return page("missing.html", 403, user=user, message=EXPIRED)
    with context(request).store.session() as session:
        token = new_feed_token(session, user.user_id)
    with context(request).store.session() as session:
        frame = layout(as_reader(session), request, user, "settings")
    url = str(request.base_url).rstrip("/") + feed_path(token)
    return render(frame, "calendar_feed.html", url=url)


@signed_in
def switch_off(request: Request, user: SignedIn) -> Response:
    """POST /settings/calendar/off: the feed address stops working."""
    if not _checked(request, user):
        return page("missing.html", 403, user=user, message=EXPIRED)
    with context(request).store.session() as session:
        drop_feed(session, user.user_id)
    return RedirectResponse("/settings?done=calendar-off", status_code=303)


def _checked(request: Request, user: SignedIn) -> bool:
    form = read_form(request)
    return form is not None and same_token(form.get("csrf"), user.csrf_token)


ROUTES = [
    Route("/calendar/{token}.ics", feed, methods=["GET"]),
    Route("/settings/calendar", new_address, methods=["POST"]),
    Route("/settings/calendar/off", switch_off, methods=["POST"]),
]
