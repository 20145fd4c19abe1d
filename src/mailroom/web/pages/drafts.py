"""A row of the Drafts box opens its draft in the compose form.

``GET /threads/{id}/draft`` redirects (303) to ``/compose?draft=<message id>``,
the thread's newest message with ``$draft`` (a reply being written sits in the
thread it answers). A thread of the user's without a draft, or one of another
user's, goes to ``/threads/{id}``, which shows it or says it is not found.
"""

from __future__ import annotations

from sqlalchemy import select
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from mailroom.store.models import Message, MessageKeyword
from mailroom.web.pages.common import context, signed_in
from mailroom.web.sessions import SignedIn


@signed_in
def open_draft(request: Request, user: SignedIn) -> Response:
    """GET /threads/{id}/draft: the compose form of the thread's newest draft."""
    thread_id: int = request.path_params["thread_id"]
    with context(request).store.session() as session:
        draft = session.scalar(
            select(Message.id)
            .join(MessageKeyword, MessageKeyword.message_id == Message.id)
            .where(
                Message.thread_id == thread_id,
                Message.user_id == user.user_id,
                MessageKeyword.keyword == "$draft",
            )
            .order_by(Message.received_at.desc(), Message.id.desc())
            .limit(1)
        )
    target = f"/threads/{thread_id}" if draft is None else f"/compose?draft={draft}"
    return RedirectResponse(target, status_code=303)
