"""The signed-in user's mail: a thread and a message's HTML (the lists: ``mailbox``).

Every query is scoped to the signed-in user: another user's thread or
message is the same 404 as one that does not exist. Only sanitized HTML
ever reaches a page, and even that is shown inside a sandboxed ``iframe``
(no scripts, no same-origin) under a strict Content-Security-Policy, so a
sanitizer miss still cannot run code.
"""

from __future__ import annotations

from sqlalchemy import select
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from mailroom.errors import NotFoundError
from mailroom.reading import message_detail
from mailroom.store.models import Message, Thread
from mailroom.store.reader import as_reader
from mailroom.web.pages.common import context, page, signed_in
from mailroom.web.pages.layout import layout, render
from mailroom.web.sessions import SignedIn

FRAME_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; frame-ancestors 'self'; sandbox"
)


@signed_in
def thread_page(request: Request, user: SignedIn) -> Response:
    """GET /threads/N: every message of one of the user's threads."""
    thread_id = request.path_params["thread_id"]
    with context(request).store.session() as session:
        frame = layout(as_reader(session), request, user, "")
        thread = session.get(Thread, thread_id)
        if thread is None or thread.user_id != user.user_id:
            return render(frame, "missing.html", 404, what=f"thread {thread_id}")
        ids = session.scalars(
            select(Message.id)
            .where(Message.thread_id == thread_id, Message.user_id == user.user_id)
            .order_by(Message.received_at, Message.id)
        ).all()
        messages = [message_detail(session, user.user_id, mid) for mid in ids]
    return render(frame, "thread.html", thread=thread, messages=messages)


@signed_in
def message_html(request: Request, user: SignedIn) -> Response:
    """GET /messages/N/html: a message's sanitized HTML, for the sandboxed frame."""
    message_id = request.path_params["message_id"]
    with context(request).store.session() as session:
        try:
            detail = message_detail(session, user.user_id, message_id)
        except NotFoundError:
            return page("missing.html", 404, what=f"message {message_id}", user=user)
    return HTMLResponse(
        detail["sanitized_html"] or "",
        headers={
            "Content-Security-Policy": FRAME_CSP,
            "X-Content-Type-Options": "nosniff",
            "Cache-Control": "no-store",
        },
    )
