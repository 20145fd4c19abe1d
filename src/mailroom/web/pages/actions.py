"""The action forms and their endpoints: ``POST /actions`` and ``POST /undo``.

One form serves a thread (its toolbar) and a list (the bulk bar, whose
checkboxes sit in the rows and join the form by its ``form`` attribute). A
form names the ``action``, one ``thread`` field per conversation, and where
to go next: ``back`` (the list, for an action that takes the conversation out
of view, such as archive) or ``here`` (the page itself, for star, read,
label). Without script the answer is a redirect there. With htmx
(``HX-Request``) the answer is the toast — a sentence and an Undo button
carrying the undo token (:mod:`mailroom.web.undo`) — and an ``HX-Trigger``
(``mailroom:go``) that tells ``static/js/actions.js`` which page to show.
Every POST checks the session's CSRF token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, tzinfo

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mailroom.categories.tabs import CATEGORIES, PRIMARY
from mailroom.errors import NotFoundError
from mailroom.listing import LabelCount, owner
from mailroom.store.models import utcnow
from mailroom.store.reader import as_reader
from mailroom.web.display import user_zone
from mailroom.web.mailactions import MOVE_BOXES, ActionError, Ask, WebActions
from mailroom.web.notice import Notice, leave
from mailroom.web.pages.common import (
    context,
    over_tls,
    page,
    read_form_lists,
    safe_next,
    same_token,
    signed_in,
)
from mailroom.web.pages.layout import BOX_TITLES, Layout
from mailroom.web.sessions import SignedIn
from mailroom.web.snoozing import presets, snooze_until
from mailroom.web.undo import MAX_TOKEN, seal, unseal

_CHOICES = (("snooze", "snooze"), ("tab", "tab"), ("target", "move"))
EXPIRED = "This form has expired; reload the page and try again."
UNDO_EXPIRED = "This undo has expired; nothing was changed."

MAX_THREADS = 500  # conversations one bulk action may name
# Actions after which the conversation is no longer where the user looked at it.
LEAVING = frozenset({"archive", "inbox", "trash", "restore", "spam", "unspam", "snooze"})
LEAVING_FROM_THREAD = LEAVING | {"unread", "tab", "move"}


@dataclass(frozen=True, slots=True)
class Toolbar:
    """What an action form shows: which threads, where to go, the menus' choices."""

    form_id: str
    thread_ids: list[int]
    csrf: str
    back: str
    here: str
    present: frozenset[str] | None  # the thread's system boxes (None: a bulk bar)
    labels: list[tuple[int, str]]  # the user's labels (id, path)
    tabs: list[str]
    snooze: list[tuple[str, str, datetime]]
    boxes: list[tuple[str, str]]
    shown_under: int | None  # the user label the list shows

    def has(self, box: str) -> bool:
        """Whether a thread toolbar's thread is in ``box`` (False for a bulk bar)."""
        return self.present is not None and box in self.present


def _flat(labels: list[LabelCount]) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    pending = list(labels)
    while pending:
        label = pending.pop()
        found.append((label.id, label.path))
        pending.extend(label.children)
    return sorted(found, key=lambda item: item[1].lower())


def toolbar(
    frame: Layout,
    thread_ids: list[int],
    *,
    back: str,
    here: str,
    present: set[str] | None = None,
) -> Toolbar:
    """The action form of a thread (``present``: its boxes) or of a list (bulk)."""
    shown = [tab for tab in CATEGORIES if tab == PRIMARY or tab not in frame.owner.tabs_off]
    under = None
    if frame.active.startswith("label:") and frame.active[6:].isdigit():
        under = int(frame.active[6:])
    return Toolbar(
        form_id="actions" if present is not None else "bulk",
        thread_ids=thread_ids,
        csrf=frame.user.csrf_token,
        back=back,
        here=here,
        present=frozenset(present) if present is not None else None,
        labels=_flat(frame.user_labels),
        tabs=shown if len(shown) > 1 else [],
        snooze=presets(frame.now, frame.zone),
        boxes=[(box, BOX_TITLES[box]) for box in MOVE_BOXES],
        shown_under=under,
    )


def _answer(
    request: Request,
    message: str,
    go: str,
    *,
    token: str | None = None,
    user: SignedIn,
    status: int = 200,
) -> Response:
    if request.headers.get("hx-request") != "true":
        if status >= 400:
            return page("missing.html", status, message=message, user=user)
        answer = RedirectResponse(go, status_code=303, headers={"Cache-Control": "no-store"})
        leave(answer, Notice(message, token or "", go), secure=over_tls(request))
        return answer
    headers = {} if status >= 400 else {"HX-Trigger": json.dumps({"mailroom:go": {"to": go}})}
    # htmx swaps only 2xx answers: a refusal is a toast too, marked as an alert.
    return page(
        "_action_done.html",
        headers=headers,
        message=message,
        token=token,
        go=go,
        error=status >= 400,
        csrf=user.csrf_token,
    )


def _ask(fields: dict[str, list[str]], now: datetime, zone: tzinfo) -> Ask:
    """The action a form asks for (the snooze time read in the user's zone)."""

    def one(name: str) -> str:
        return (fields.get(name) or [""])[0].strip()

    def number(name: str) -> int | None:
        value = one(name)
        return int(value) if value.isdigit() else None

    threads = [int(v) for v in fields.get("thread", []) if v.isdigit()]
    if len(threads) > MAX_THREADS:
        raise ActionError(f"Choose at most {MAX_THREADS} conversations at once.")
    # The menus' buttons name only their choice: a snooze preset, a tab, a move target.
    action = one("action") or next((name for field, name in _CHOICES if one(field)), "")
    until = snooze_until(one("snooze"), one("until"), now, zone) if action == "snooze" else None
    return Ask(
        action=action,
        thread_ids=threads,
        label_id=number("label"),
        tab=one("tab") or None,
        until=until,
        target=one("target") or None,
        shown_under=number("shown_under"),
    )


def _field(fields: dict[str, list[str]] | None, name: str) -> str:
    return ((fields or {}).get(name) or [""])[0]


@signed_in
def act(request: Request, user: SignedIn) -> Response:
    """POST /actions: one action on the conversations the form names."""
    fields = read_form_lists(request, max_fields=MAX_THREADS + 20)
    back = safe_next(_field(fields, "back"))
    here = safe_next(_field(fields, "here") or back)
    if fields is None or not same_token(_field(fields, "csrf"), user.csrf_token):
        return _answer(request, EXPIRED, here, user=user, status=403)
    try:
        with context(request).store.session() as session:
            zone = user_zone(owner(as_reader(session), user.user_id).settings)
            ask = _ask(fields, utcnow(), zone)
            done = WebActions(session, user.user_id).perform(ask)
    except (ActionError, NotFoundError) as exc:
        return _answer(request, str(exc), here, user=user, status=400)
    leaving = LEAVING_FROM_THREAD if here != back else LEAVING
    go = back if ask.action in leaving else here
    return _answer(request, done.message, go, token=seal(done.record, user.csrf_token), user=user)


@signed_in
def undo(request: Request, user: SignedIn) -> Response:
    """POST /undo: reverse the action whose token the form carries."""
    fields = read_form_lists(request, limit=MAX_TOKEN + 4096)
    go = safe_next(_field(fields, "go"))
    if fields is None or not same_token(_field(fields, "csrf"), user.csrf_token):
        return _answer(request, EXPIRED, go, user=user, status=403)
    record = unseal(_field(fields, "token"), user.csrf_token)
    if record is None:
        return _answer(request, UNDO_EXPIRED, go, user=user, status=400)
    try:
        with context(request).store.session() as session:
            message = WebActions(session, user.user_id).undo(record)
    except ActionError as exc:
        return _answer(request, str(exc), go, user=user, status=400)
    return _answer(request, message, go, user=user)
