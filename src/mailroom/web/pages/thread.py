"""One conversation: its messages, their frames and attachments, "why is this here?".

=======================================  ======================================
``GET  /threads/{id}``                   the thread (``?back=`` the list it came
                                         from, ``?images=<message id>`` shows that
                                         message's remote images, ``?why=1`` with
                                         "why is this here?" answered)
``GET  /threads/{id}/why``               that answer alone (what the page's
                                         ``<details>`` loads when it is opened)
``GET  /messages/{id}/html``             the message's frame document
                                         (``?images=1``: with remote images)
``GET  /messages/{id}/parts/{part}``     an attachment, as a download
``POST /senders/images``                 always show remote images from a sender
=======================================  ======================================

Every query is scoped to the signed-in user: another user's thread, message or
part is the same 404 as one that does not exist. Older messages are folded
(``<details>``); the newest and the ones that were unread stay open. Opening
a thread marks it read unless the user switched that off
(:mod:`mailroom.web.prefs`).

The frame is sized to its content by the page's own script
(``static/js/thread.js``): the frame is ``sandbox="allow-same-origin
allow-popups allow-popups-to-escape-sandbox"`` — no ``allow-scripts``, so
nothing in a mail ever runs, and same-origin only so that the parent page
may read the frame's height (a frame that cannot run script cannot post its
height, and the server cannot know it). Links open in a new tab
(``target=_blank rel="noopener noreferrer"`` from the sanitizer; the popup
escapes the sandbox so the site works normally). Without script the frame
keeps a fixed height and scrolls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from mailroom.categories.recompute import explain
from mailroom.crypto.mail_reading import raw_message
from mailroom.crypto.message_fields import open_rows
from mailroom.errors import NotFoundError
from mailroom.jmap import ids
from mailroom.jmap.blobs import blob_data, find_blob
from mailroom.jmap.bodies import find_part, parse_structure, part_content
from mailroom.labels.operations import Operations
from mailroom.reading import message_detail, message_details, thread_subjects
from mailroom.store.models import Message, Thread, ThreadLabel
from mailroom.store.reader import as_reader, required_stamp
from mailroom.web.display import full_time
from mailroom.web.event_lines import event_lines
from mailroom.web.frame import FRAME_CSP, FRAME_CSP_IMAGES, INLINE_TYPES, frame_html, wants_inline
from mailroom.web.pages.actions import toolbar
from mailroom.web.pages.common import (
    context,
    page,
    read_form,
    safe_next,
    same_token,
    signed_in,
)
from mailroom.web.pages.layout import Layout, layout, render
from mailroom.web.pages.neighbours import neighbours
from mailroom.web.prefs import allow_images_from, marks_read_on_open, shows_images_from
from mailroom.web.sessions import SignedIn


@dataclass(frozen=True, slots=True)
class Shown:
    """One message as the thread page shows it."""

    detail: dict[str, Any]
    open: bool  # unfolded
    blocked: int  # remote images held back
    images: bool  # its remote images are shown
    frame: str  # the frame's URL ("" when the message has no HTML)
    when: str  # received, in the user's time zone
    recipients: str  # "To: …  Cc: …"
    images_href: str  # this thread with this message's remote images shown


def _people(pairs: list[Any]) -> str:
    """``Name <address>, …`` of stored [name, address] pairs."""
    out = []
    for pair in pairs:
        name, email = pair if isinstance(pair, list) and len(pair) == 2 else ("", pair)
        out.append(f"{name} <{email}>" if name else str(email))
    return ", ".join(out)


def _own_thread(session: Session, user: SignedIn, thread_id: int) -> Thread | None:
    """The user's thread ``thread_id``; None when it does not exist or is someone else's."""
    thread = session.get(Thread, thread_id)
    return thread if thread is not None and thread.user_id == user.user_id else None


def _message_ids(session: Session, user: SignedIn, thread_id: int) -> list[int]:
    """The thread's message ids, oldest first."""
    return list(
        session.scalars(
            select(Message.id)
            # "+ 0": look the thread's messages up by the thread index; SQLite
            # would otherwise walk every message of the user in received order.
            .where(Message.thread_id == thread_id, Message.user_id + 0 == user.user_id)
            .order_by(Message.received_at, Message.id)
        )
    )


@signed_in
def thread_page(request: Request, user: SignedIn) -> Response:
    """GET /threads/N: every message of one of the user's threads."""
    thread_id = request.path_params["thread_id"]
    back = safe_next(request.query_params.get("back"))
    with context(request).store.session() as session:
        thread = _own_thread(session, user, thread_id)
        if thread is None:
            frame = layout(as_reader(session), request, user, "")
            return render(frame, "missing.html", 404, what=f"thread {thread_id}")
        ids_ = _message_ids(session, user, thread_id)
        details = message_details(session, user.user_id, ids_)
        frame = layout(as_reader(session), request, user, "")
        if marks_read_on_open(frame.owner.settings):
            unread = [d["id"] for d in details if not d["seen"]]
            if unread:
                Operations(session, user.user_id).mark_read(unread)
                frame = layout(as_reader(session), request, user, "")
        images = request.query_params.get("images", "")
        path = f"/threads/{thread_id}"
        shown = _shown(details, frame, images, path, back)
        events = event_lines(session, user.user_id, ids_, frame.zone)
        # The explanation costs as much as the rest of the page: it is worked out
        # when asked for (the <details> loads /why when opened; ?why=1 without script).
        why = _why(session, user.user_id, ids_) if request.query_params.get("why") else None
        roles = {v: k for k, v in frame.roles.items()}
        present = {
            roles[lid]
            for lid in session.scalars(
                select(ThreadLabel.label_id).where(ThreadLabel.thread_id == thread_id)
            )
            if lid in roles
        }
        here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        bar = toolbar(frame, [thread_id], back=back, here=here, present=present)
        around = neighbours(as_reader(session), frame, thread, back)
        # A sealed thread keeps no subject: its oldest message's, opened.
        subject = thread.subject or thread_subjects(session, user.user_id, [thread_id]).get(
            thread_id, ""
        )
    return render(
        frame,
        "thread.html",
        thread=thread,
        subject=subject,
        messages=shown,
        events=events,
        why=why,
        why_href=f"{path}?{urlencode({'why': '1', **({'back': back} if back != '/' else {})})}",
        has_messages=bool(ids_),
        around=around,
        back=back,
        here=here,
        bar=bar,
        tab=thread.category,
    )


def _why(session: Session, user_id: int, message_ids: list[int]) -> list[str]:
    """Why the thread is in its tab: explain()'s sentences for its newest message."""
    return explain(session, user_id, message_ids[-1]).lines() if message_ids else []


@signed_in
def thread_why(request: Request, user: SignedIn) -> Response:
    """GET /threads/N/why: the "why is this here?" list of one of the user's threads."""
    thread_id = request.path_params["thread_id"]
    with context(request).store.session() as session:
        if _own_thread(session, user, thread_id) is None:
            return page("missing.html", 404, what=f"thread {thread_id}", user=user)
        lines = _why(session, user.user_id, _message_ids(session, user, thread_id))
    return page("_why.html", why=lines)


def _shown(
    details: list[dict[str, Any]], frame: Layout, images: str, path: str, back: str
) -> list[Shown]:
    settings, zone = frame.owner.settings, frame.zone
    shown = []
    for index, detail in enumerate(details):
        html = detail["sanitized_html"]
        allowed = images == str(detail["id"]) or shows_images_from(settings, detail["from"])
        blocked = 0 if allowed or not html else frame_html(html, show_remote=False).blocked
        url = ""
        if html:
            url = f"/messages/{detail['id']}/html" + ("?images=1" if allowed else "")
        last = index == len(details) - 1
        recipients = f"To: {_people(detail['to'])}" if detail["to"] else ""
        if detail["cc"]:
            recipients += f"  Cc: {_people(detail['cc'])}"
        query = {"images": str(detail["id"]), **({"back": back} if back != "/" else {})}
        shown.append(
            Shown(
                detail,
                last or not detail["seen"],
                blocked,
                allowed,
                url,
                full_time(required_stamp(detail["received_at"]), zone),
                recipients,
                f"{path}?{urlencode(query)}",
            )
        )
    return shown


def _inline_parts(session: Session, message_id: int, attachments: list[Any]) -> dict[str, Any]:
    """Content-ID -> (type, bytes) of the message's inline raster images."""
    wanted = {
        str(a.get("content_id")).strip("<>"): str(a.get("part"))
        for a in attachments
        if a.get("content_id") and a.get("content_type") in INLINE_TYPES
    }
    if not wanted:
        return {}
    data = raw_message(session, message_id)
    if data is None:
        return {}
    structure = parse_structure(message_id, data)
    found = {}
    for cid, path in wanted.items():
        part = find_part(structure, path)
        if part is not None:
            found[cid] = (part.ctype, part_content(structure, part))
    return found


@signed_in
def message_html(request: Request, user: SignedIn) -> Response:
    """GET /messages/N/html: a message's sanitized HTML as the sandboxed frame's document."""
    message_id = request.path_params["message_id"]
    show = request.query_params.get("images") == "1"
    with context(request).store.session() as session:
        try:
            detail = message_detail(session, user.user_id, message_id)
        except NotFoundError:
            return page("missing.html", 404, what=f"message {message_id}", user=user)
        sanitized = detail["sanitized_html"] or ""
        inline = {}
        if wants_inline(sanitized):
            inline = _inline_parts(session, message_id, detail["attachments"])
    body = frame_html(sanitized, show_remote=show, inline=inline)
    return HTMLResponse(
        body.html,
        headers={
            "Content-Security-Policy": FRAME_CSP_IMAGES if show else FRAME_CSP,
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer",
            "Cache-Control": "no-store",
        },
    )


@signed_in
def attachment(request: Request, user: SignedIn) -> Response:
    """GET /messages/N/parts/P: one attachment of the user's message, as a download."""
    message_id = request.path_params["message_id"]
    path = request.path_params["part"]
    with context(request).store.session() as session:
        found = find_blob(session, user.user_id, ids.part_blob_id(message_id, path))
        data = blob_data(session, found) if found is not None else None
    if found is None or data is None:
        return page("missing.html", 404, what=f"attachment {path} of message {message_id}")
    name = (found.filename or f"attachment-{path}").replace("\r", " ").replace("\n", " ")
    ascii_name = name.encode("ascii", "replace").decode().replace('"', "'").replace("\\", "_")
    return Response(
        data,
        media_type="application/octet-stream",
        headers={
            "Content-Disposition": f'attachment; filename="{ascii_name}"; '
            f"filename*=UTF-8''{quote(name, safe='')}",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'; sandbox",
            "Cache-Control": "private, no-store",
        },
    )


@signed_in
def allow_sender_images(request: Request, user: SignedIn) -> Response:
    """POST /senders/images: always show remote images from the sender of a message."""
    fields = read_form(request) or {}
    if not same_token(fields.get("csrf"), user.csrf_token):
        return page("missing.html", 403, message="This form has expired; reload the page.")
    back = safe_next(fields.get("back"))
    message_id = fields.get("message", "")
    with context(request).store.session() as session:
        sender = None
        if message_id.isdigit():
            found = session.execute(
                select(Message.id, Message.user_id, Message.sealed, Message.from_email).where(
                    Message.id == int(message_id), Message.user_id == user.user_id
                )
            ).all()
            sender = open_rows(session, found, ["from_email"])[0]["from_email"] if found else None
        if not sender:
            return page("missing.html", 404, what=f"message {message_id}", user=user)
        allow_images_from(session, user.user_id, sender)
    return RedirectResponse(back, status_code=303, headers={"Cache-Control": "no-store"})
