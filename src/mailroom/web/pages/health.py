"""``GET /health``: open to anyone, it says only that the store answers."""

from __future__ import annotations

from sqlalchemy import text
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mailroom import __version__
from mailroom.web.pages.common import context


def health(request: Request) -> Response:
    """GET /health: ``{"status": "ok", "version": ...}`` once the store answers."""
    with context(request).store.session() as session:
        session.execute(text("SELECT 1"))
    return JSONResponse({"status": "ok", "version": __version__})
