"""The conversations before and after an open one, in the list it was opened from.

Gmail's ``j``/``k`` in a conversation open the next older / newer conversation of
the list the user came from. The thread page knows that list only by its
``back`` address (``/``, ``/?tab=updates``, ``/mail/archive``,
``/label/7?account=2``); :func:`neighbours` reads the view from it and asks the
listing for one thread on each side of the open one, by the same keyset the
list pages with. A list that is not a mailbox view (search results) has no
neighbours: the links are simply left out.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode, urlsplit

from mailroom.categories.tabs import PRIMARY
from mailroom.listing import BOXES, Cursor, View, thread_page
from mailroom.store.models import Thread
from mailroom.store.reader import Reader
from mailroom.web.pages.layout import Layout, account_filter

__all__ = ["Neighbours", "neighbours"]


@dataclass(frozen=True, slots=True)
class Neighbours:
    """The thread pages of the newer and the older conversation ("" when there is none)."""

    newer: str = ""
    older: str = ""


def _view(frame: Layout, back: str) -> View | None:
    """The mailbox view the ``back`` address lists, or None when it is not one."""
    parts = urlsplit(back)
    query = parse_qs(parts.query)
    account_id = account_filter(query.get("account", [""])[0], frame.owner)
    path = parts.path
    if path == "/":
        tab = frame.owner.inbox_tab(query.get("tab", [PRIMARY])[0])
        return View("inbox", None, tab, account_id, frame.owner.tabs_off)
    head, _, rest = path.strip("/").partition("/")
    if head == "mail" and rest in BOXES and rest != "inbox":
        return View(rest, None, None, account_id, frame.owner.tabs_off)
    if head == "label" and rest.isdigit() and frame.find_label(int(rest)) is not None:
        return View("label", int(rest), None, account_id, frame.owner.tabs_off)
    return None


def neighbours(reader: Reader, frame: Layout, thread: Thread, back: str) -> Neighbours:
    """Links to the conversations next to ``thread`` in the list at ``back``."""
    view = _view(frame, back)
    if view is None or thread.last_message_at is None:
        return Neighbours()
    here = Cursor(thread.last_message_at, thread.id)
    user = frame.user.user_id
    older = thread_page(reader, user, view, frame.roles, before=here, size=1).rows
    newer = thread_page(reader, user, view, frame.roles, after=here, size=1).rows
    suffix = f"?{urlencode({'back': back})}" if back != "/" else ""
    return Neighbours(
        newer=f"/threads/{newer[0].id}{suffix}" if newer else "",
        older=f"/threads/{older[0].id}{suffix}" if older else "",
    )
