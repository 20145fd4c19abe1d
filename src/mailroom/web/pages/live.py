"""Live updates: the push stream's web sign-in and the fragments ``live.js`` refreshes.

The page listens to the same push stream JMAP clients use
(``GET /jmap/eventsource``, ``jmap.push``): :func:`session_user` lets the
browser's session cookie open it, so there is no second mechanism. On a
``StateChange`` for Email, Thread or Mailbox, ``static/js/live.js`` swaps in
the sidebar from ``GET /fragments/sidebar?page=<the page's path and query>``
(its counts, the page's entry still marked) and, on a mailbox page, the
page's own ``#main`` (mailbox pages change nothing when read).
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import Response

from mailroom.store.reader import as_reader
from mailroom.web.pages.common import context, page, safe_next, signed_in, signed_in_user
from mailroom.web.pages.layout import layout
from mailroom.web.sessions import SignedIn


def session_user(request: Request) -> int | None:
    """The user of the request's live web session, for the push stream (``jmap.app``)."""
    user = signed_in_user(request)
    return None if user is None else user.user_id


def active_entry(path: str) -> str:
    """The sidebar entry a page's path marks: a box name, ``label:<id>`` or none."""
    if path == "/":
        return "inbox"
    head, _, rest = path.strip("/").partition("/")
    if head == "mail" and rest and "/" not in rest:
        return rest
    if head == "label" and rest.isdigit():
        return f"label:{rest}"
    return ""


@signed_in
def sidebar(request: Request, user: SignedIn) -> Response:
    """GET /fragments/sidebar?page=PATH: the sidebar of that page, with fresh counts."""
    wanted = urlsplit(safe_next(request.query_params.get("page")))
    account = dict(parse_qsl(wanted.query)).get("account")
    # The frame reads the account filter and the page's path from the request:
    # give it the page's, not this fragment's.
    scope = dict(request.scope)
    scope["path"] = wanted.path
    scope["query_string"] = urlencode({"account": account} if account else {}).encode()
    as_page = Request(scope)
    with context(request).store.session() as session:
        frame = layout(as_reader(session), as_page, user, active_entry(wanted.path))
    return page("_sidebar.html", layout=frame, user=user)
