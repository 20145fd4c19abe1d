"""The mailbox pages: the Inbox with its tabs, every other sidebar box, a user label.

``GET /`` is the unified Inbox (every account, threads collapsed) on one tab
at a time (``?tab=promotions``; Primary when none is given or the tab is
switched off); ``GET /mail/<box>`` is Starred, Snoozed, Sent, Drafts,
Archive, All mail, Spam or Trash; ``GET /label/<id>`` a user label. Every
page takes ``account`` (the account filter) and ``before`` / ``after`` (keyset
cursors: the older or the newer page). An unknown box or another user's
label is the same 404 as one that does not exist.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from mailroom.categories.tabs import PRIMARY
from mailroom.listing import BOXES, Cursor, Page, View, tab_unread, thread_page
from mailroom.store.reader import Reader, as_reader
from mailroom.web.pages.actions import toolbar
from mailroom.web.pages.common import context, signed_in
from mailroom.web.pages.layout import BOX_TITLES, Layout, box_path, layout, render
from mailroom.web.sessions import SignedIn

EMPTY = {
    "inbox": "Nothing here. Mail that arrives in this tab shows up here.",
    "starred": "No starred conversations.",
    "snoozed": "Nothing is snoozed.",
    "sent": "Nothing sent yet.",
    "drafts": "No drafts.",
    "archive": "Nothing archived.",
    "all": "No mail yet. Import some with mailroom import PATH, or add an account.",
    "spam": "No spam.",
    "trash": "Trash is empty.",
    "label": "No conversations with this label.",
}


@dataclass(frozen=True, slots=True)
class Tab:
    """An inbox tab in the tabs bar."""

    name: str
    title: str
    unread: int
    href: str


@signed_in
def inbox(request: Request, user: SignedIn) -> Response:
    """GET /: the Inbox on one tab."""
    return _listing(request, user, "inbox")


@signed_in
def box(request: Request, user: SignedIn) -> Response:
    """GET /mail/BOX: one of the fixed sidebar boxes."""
    name = request.path_params["box"]
    if name not in BOXES or name == "inbox":
        return _missing(request, user, f"mailbox {name}")
    return _listing(request, user, name)


@signed_in
def label(request: Request, user: SignedIn) -> Response:
    """GET /label/ID: the threads with one of the user's labels."""
    return _listing(request, user, "label", request.path_params["label_id"])


def _missing(request: Request, user: SignedIn, what: str) -> Response:
    with context(request).store.session() as session:
        frame = layout(as_reader(session), request, user, "")
    return render(frame, "missing.html", 404, what=what)


def _listing(request: Request, user: SignedIn, name: str, label_id: int | None = None) -> Response:
    before = Cursor.parse(request.query_params.get("before"))
    after = None if before else Cursor.parse(request.query_params.get("after"))
    with context(request).store.session() as session:
        reader = as_reader(session)
        active = f"label:{label_id}" if label_id is not None else name
        frame = layout(reader, request, user, active)
        if label_id is not None:
            found = frame.find_label(label_id)
            if found is None:
                return render(frame, "missing.html", 404, what=f"label {label_id}")
            heading, path = found.path, f"/label/{label_id}"
        else:
            heading, path = BOX_TITLES[name], box_path(name)
        tabs: list[Tab] = []
        tab = None
        if name == "inbox":
            tab, tabs = _tabs(request, frame, reader)
        view = View(name, label_id, tab, frame.account_id, frame.owner.tabs_off)
        listed = thread_page(reader, user.user_id, view, frame.roles, before=before, after=after)
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return render(
        frame,
        "mailbox.html",
        bulk=toolbar(frame, [], back=here, here=here),
        heading=heading,
        tabs=tabs,
        tab=tab,
        page=listed,
        pager=_pager(frame, path, tab if tabs else None, listed),
        empty=EMPTY[name],
    )


def _tabs(request: Request, frame: Layout, reader: Reader) -> tuple[str, list[Tab]]:
    """The chosen tab and the tabs bar (empty when only Primary is on)."""
    shown = frame.owner.tabs_on
    chosen = frame.owner.inbox_tab(request.query_params.get("tab", PRIMARY))
    if len(shown) == 1:
        return chosen, []
    inbox = frame.roles.get("inbox")
    unread = {}
    if inbox is not None:
        unread = tab_unread(reader, frame.user.user_id, inbox, frame.account_id)
    off = sum(unread.get(tab, 0) for tab in frame.owner.tabs_off if tab != PRIMARY)
    return chosen, [
        Tab(
            tab,
            tab.capitalize(),
            unread.get(tab, 0) + (off if tab == PRIMARY else 0),
            frame.href("/", tab=None if tab == PRIMARY else tab),
        )
        for tab in shown
    ]


def _pager(frame: Layout, path: str, tab: str | None, listed: Page) -> dict[str, str | None]:
    """The links to the newer and the older page (None where there is none)."""
    tab_param = None if tab in (None, PRIMARY) else tab
    return {
        "newer": frame.href(path, tab=tab_param, after=listed.newer.token())
        if listed.newer
        else None,
        "older": frame.href(path, tab=tab_param, before=listed.older.token())
        if listed.older
        else None,
    }
