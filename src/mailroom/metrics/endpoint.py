"""``GET /metrics`` of ``mailroom serve``, and the middleware that counts its HTTP answers.

The endpoint answers the process's own metrics and the store's view
(:mod:`.store_view`) to scrapers the gate lets in (:mod:`.access`), anyone
else gets 403. It is a plain ``def`` endpoint: the view reads the database and
the queues, which must not block the event loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mailroom.metrics import catalogue
from mailroom.metrics.access import ScrapeAccess
from mailroom.metrics.store_view import StoreView


class _Both(Collector):
    """The process's registry followed by the store's view, as one scrape."""

    def __init__(self, *parts: Collector) -> None:
        self.parts = parts

    def collect(self) -> Iterator[Metric]:
        for part in self.parts:
            yield from part.collect()


def _state(request: Request, name: str, make: Any) -> Any:
    """An object made once per application and kept on ``app.state``."""
    value = getattr(request.app.state, name, None)
    if value is None:
        value = make()
        setattr(request.app.state, name, value)
    return value


def metrics(request: Request) -> Response:
    """GET /metrics: the Prometheus text format, for scrapers the gate admits (else 403)."""
    from mailroom.web.pages.operators import app_queues, web_settings

    settings = web_settings(request)
    access = _state(request, "metrics_access", lambda: ScrapeAccess.from_settings(settings))
    client = request.client.host if request.client else None
    if not access.permits(client, request.headers.get("authorization")):
        return PlainTextResponse("Forbidden", status_code=403)
    queues = app_queues(request)  # shared with /admin
    view = _state(request, "store_view", lambda: StoreView(request.app.state.web.store, queues))
    body = generate_latest(_Both(REGISTRY, view))
    return Response(body, media_type=CONTENT_TYPE_LATEST)


class HttpMetrics:
    """ASGI middleware counting every HTTP answer by part and status (websockets pass by)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, noting the status it is answered with."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # an exception before any answer becomes a 500 further out

        async def noting(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, noting)
        finally:
            catalogue.http_response(str(scope.get("path", "")), status)
