"""The frame every signed-in page shares: top bar, sidebar and the account filter.

A page builds a :class:`Layout` inside its own database session (one query
for the user's settings and accounts, one for the sidebar's counts) and
renders its template through :func:`render`; ``base.html`` draws the top bar
and ``_sidebar.html`` from it: the user menu's links (Admin for operators
only), the Compose button and the display density (a class on ``<body>``,
``density-compact`` or ``density-comfortable``). The account filter is the ``account`` query
parameter (an account id of the user's); :meth:`Layout.href` keeps it on the
links it builds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from mailroom.listing import BOXES, LabelCount, Owner, label_tree, owner
from mailroom.store.models import utcnow
from mailroom.store.reader import Reader
from mailroom.web.display import user_zone
from mailroom.web.notice import Notice, forget, left
from mailroom.web.pages.common import over_tls, page
from mailroom.web.pages.operators import is_admin
from mailroom.web.sessions import SignedIn

BOX_TITLES = {
    "inbox": "Inbox",
    "starred": "Starred",
    "snoozed": "Snoozed",
    "sent": "Sent",
    "drafts": "Drafts",
    "archive": "Archive",
    "all": "All mail",
    "spam": "Spam",
    "trash": "Trash",
}
assert tuple(BOX_TITLES) == BOXES
DENSITIES = ("comfortable", "compact")  # users.settings["density"], set on /settings


def density(settings: Mapping[str, Any]) -> str:
    """The user's display density (``comfortable`` unless set to ``compact``)."""
    value = settings.get("density")
    return value if value in DENSITIES else DENSITIES[0]


def box_path(box: str) -> str:
    """The page of a sidebar box: ``/`` for the Inbox, ``/mail/<box>`` for the others."""
    return "/" if box == "inbox" else f"/mail/{box}"


@dataclass(frozen=True)
class Layout:
    """The signed-in user, their settings, the account filter and the sidebar."""

    user: SignedIn
    owner: Owner
    account_id: int | None
    labels: list[LabelCount]  # system labels in sidebar order, then the user's label tree
    active: str  # the sidebar entry of this page: a box name or "label:<id>"
    path: str  # this page's path (the account filter's links stay on it)
    now: datetime
    admin: bool  # an operator: the user menu links to /admin
    notice: Notice | None = None  # an action's toast for a page shown without script
    secure: bool = False  # reached over https (cookies are then Secure)

    @property
    def density(self) -> str:
        """The user's display density, one of :data:`DENSITIES`."""
        return density(self.owner.settings)

    @property
    def zone(self) -> tzinfo:
        """The user's time zone."""
        return user_zone(self.owner.settings)

    @property
    def roles(self) -> dict[str, int]:
        """System role -> label id."""
        return {label.role: label.id for label in self.labels if label.role is not None}

    @property
    def boxes(self) -> list[tuple[str, str, int | None]]:
        """(box, title, count or None) of the fixed sidebar entries the user has."""
        counts = {label.role: label.count for label in self.labels if label.role}
        return [
            (box, BOX_TITLES[box], counts.get(box))
            for box in BOXES
            if box == "all" or box in counts
        ]

    @property
    def user_labels(self) -> list[LabelCount]:
        """The top of the user's label tree."""
        return [label for label in self.labels if label.role is None]

    def find_label(self, label_id: int) -> LabelCount | None:
        """The user label with this id, anywhere in the tree."""
        pending = list(self.user_labels)
        while pending:
            label = pending.pop()
            if label.id == label_id:
                return label
            pending.extend(label.children)
        return None

    def href(self, path: str, **params: str | None) -> str:
        """``path`` with ``params`` (None ones left out) and the account filter."""
        query = {key: value for key, value in params.items() if value is not None}
        if self.account_id is not None:
            query["account"] = str(self.account_id)
        return f"{path}?{urlencode(query)}" if query else path

    def account_href(self, account_id: int | None) -> str:
        """This page under another account filter (None: every account)."""
        if account_id is None:
            return self.path
        return f"{self.path}?{urlencode({'account': account_id})}"


def account_filter(given: str, who: Owner) -> int | None:
    """The account an ``account`` parameter's value names, if it is one of the user's."""
    if given.isdigit() and any(account == int(given) for account, _ in who.accounts):
        return int(given)
    return None


def layout(reader: Reader, request: Request, user: SignedIn, active: str) -> Layout:
    """The frame of a page for ``user``, read in the caller's session."""
    who = owner(reader, user.user_id)
    account = account_filter(request.query_params.get("account", ""), who)
    labels = label_tree(reader, user.user_id, account)
    path, admin = request.url.path, is_admin(request, user)
    notice = left(request)
    return Layout(
        user, who, account, labels, active, path, utcnow(), admin, notice, over_tls(request)
    )


def render(frame: Layout, template: str, status: int = 200, **values: Any) -> Response:
    """A signed-in page: ``template`` (which extends ``base.html``) inside the frame."""
    response = page(template, status, layout=frame, user=frame.user, **values)
    if frame.notice is not None:
        forget(response, secure=frame.secure)
    return response
