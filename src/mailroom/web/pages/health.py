"""``GET /health`` and ``GET /ready``: open to anyone, they say only ok or not ok.

``/health`` is liveness: the process answers HTTP. It touches nothing else, so
a slow database never gets a live server restarted. ``/ready`` is readiness:
the database answers, Redis too when configured, and the schema is migrated
(:mod:`mailroom.metrics.readiness`); 503 with a short reason otherwise, for a
load balancer to route around this process meanwhile.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mailroom.metrics.readiness import readiness
from mailroom.web.pages.common import context
from mailroom.web.pages.operators import web_settings


async def health(_request: Request) -> Response:
    """GET /health: ``{"status": "ok"}`` while the process serves HTTP."""
    return JSONResponse({"status": "ok"})


def ready(request: Request) -> Response:
    """GET /ready: ``{"status": "ok"}``, or 503 ``{"status": "not ok", "reason": ...}``."""
    answer = readiness(context(request).store, web_settings(request))
    if answer.ok:
        return JSONResponse({"status": "ok"})
    return JSONResponse({"status": "not ok", "reason": answer.reason}, status_code=503)
