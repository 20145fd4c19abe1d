"""The HTTP application: ``/health``, the newest threads and a thread page.

Only sanitized HTML ever reaches a page, and even that is shown inside a
sandboxed ``iframe`` (no scripts, no same-origin) under a strict
Content-Security-Policy, so a sanitizer miss still cannot run code.
"""

from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape
from sqlalchemy import select, text
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from mailroom import __version__
from mailroom.errors import NotFoundError
from mailroom.jmap.app import JmapConfig, jmap_routes
from mailroom.owners import get_or_create_user
from mailroom.reading import message_detail, newest_threads
from mailroom.store.engine import Store
from mailroom.store.models import Message, Thread

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; frame-src 'self'"

_templates = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(default=True),
)


def _page(name: str, status: int = 200, **values: object) -> HTMLResponse:
    body = _templates.get_template(name).render(version=__version__, **values)
    return HTMLResponse(body, status_code=status, headers={"Content-Security-Policy": CSP})


def create_app(store: Store, owner: str = "me", jmap: JmapConfig | None = None) -> Starlette:
    """The web application serving ``owner``'s mail from ``store``, and JMAP for every user."""

    async def health(_request: Request) -> Response:
        with store.session() as session:
            session.execute(text("SELECT 1"))
        return JSONResponse({"status": "ok", "version": __version__})

    async def index(_request: Request) -> Response:
        with store.session() as session:
            user = get_or_create_user(session, owner)
            threads = newest_threads(session, user.id, limit=100)
        return _page("index.html", threads=threads, owner=owner)

    async def thread_page(request: Request) -> Response:
        thread_id = request.path_params["thread_id"]
        with store.session() as session:
            user = get_or_create_user(session, owner)
            thread = session.get(Thread, thread_id)
            if thread is None or thread.user_id != user.id:
                return _page("missing.html", status=404, what=f"thread {thread_id}")
            ids = session.scalars(
                select(Message.id)
                .where(Message.thread_id == thread_id)
                .order_by(Message.received_at, Message.id)
            ).all()
            messages = [message_detail(session, user.id, mid) for mid in ids]
        return _page("thread.html", thread=thread, messages=messages)

    async def message_html(request: Request) -> Response:
        message_id = request.path_params["message_id"]
        with store.session() as session:
            user = get_or_create_user(session, owner)
            try:
                detail = message_detail(session, user.id, message_id)
            except NotFoundError:
                return _page("missing.html", status=404, what=f"message {message_id}")
        return HTMLResponse(
            detail["sanitized_html"] or "",
            headers={
                "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                "img-src 'self'; sandbox",
                "X-Content-Type-Options": "nosniff",
            },
        )

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/", index),
            Route("/threads/{thread_id:int}", thread_page),
            Route("/messages/{message_id:int}/html", message_html),
            *jmap_routes(store, jmap),
        ]
    )
