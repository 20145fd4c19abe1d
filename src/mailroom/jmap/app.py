"""The JMAP HTTP endpoints, added to the web application by ``jmap_routes``.

=================================================  ==========================
``GET  /.well-known/jmap``                          the Session (RFC 8620 §2)
``POST /jmap/api``                                  API requests (§3)
``GET  /jmap/download/{accountId}/{blobId}/{name}`` raw messages and parts (§6.2)
``POST /jmap/upload/{accountId}``                   refused: nothing uses uploads yet
``GET  /jmap/eventsource``                          push (§7.3, ``jmap.push``)
=================================================  ==========================

Every endpoint needs HTTP Basic (user and password) or a bearer token; the
answer to anything else is 401 with both challenges, and 429 with
``Retry-After`` while the name or client address is locked out after too
many wrong passwords (``jmap.auth``). A user only ever
reaches their own account: another account id is ``accountNotFound`` /
404, another user's object ids are ``notFound``. Database work runs in the
thread pool, so open push streams never wait behind a slow query.

Downloads are served as attachments with ``X-Content-Type-Options:
nosniff`` and a ``sandbox`` Content-Security-Policy, whatever type the
client asked for: a message part is the sender's content and must never
run as this site's page.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import quote

from sqlalchemy import select
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from mailroom.jmap import ids
from mailroom.jmap.auth import Authenticator, LockedOut, Principal
from mailroom.jmap.bodies import find_part, parse_structure, part_content
from mailroom.jmap.dispatcher import Dispatcher, Limits
from mailroom.jmap.errors import LIMIT, Problem
from mailroom.jmap.methods import METHODS
from mailroom.jmap.push import event_stream, parse_request
from mailroom.jmap.session import CAPABILITIES, session_document, session_state
from mailroom.store.engine import Store
from mailroom.store.models import Blob, Message

log = logging.getLogger(__name__)

CHALLENGE = 'Basic realm="mailroom", charset="UTF-8", Bearer realm="mailroom"'
_MEDIA_TYPE = re.compile(
    r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
)


@dataclass(frozen=True)
class JmapConfig:
    """Tunables of the JMAP server."""

    poll_interval: float = 0.5  # seconds between change-log polls of a push stream
    limits: Limits = field(default_factory=Limits)
    # Set when the server shuts down: open push streams end at their next poll.
    stopping: threading.Event = field(default_factory=threading.Event)


def _unauthorized() -> Response:
    return Problem(
        "about:blank", 401, "Authenticate with HTTP Basic (user and password) or a bearer token."
    ).response(headers={"WWW-Authenticate": CHALLENGE})


def _locked_out(locked: LockedOut) -> Response:
    return Problem(
        "about:blank",
        429,
        f"Too many failed sign-ins; try again in {locked.minutes} minutes (or use an API token).",
    ).response(headers={"Retry-After": str(locked.retry_after)})


def _client(request: Request) -> str | None:
    return request.client.host if request.client else None


class JmapServer:
    """The JMAP endpoints over one store."""

    def __init__(
        self, store: Store, config: JmapConfig | None = None, auth: Authenticator | None = None
    ) -> None:
        self.store = store
        self.config = config or JmapConfig()
        self.auth = auth or Authenticator(store)
        self.dispatcher = Dispatcher(
            store, METHODS, CAPABILITIES, self.config.limits, session_state
        )
        self._running: Counter[int] = Counter()
        self._lock = threading.Lock()

    def _identify(self, header: str, address: str | None) -> Principal | Response:
        """The principal, or the 401/429 answer to send instead."""
        try:
            principal = self.auth.authenticate(header, address)
        except LockedOut as locked:
            return _locked_out(locked)
        return principal if principal is not None else _unauthorized()

    async def _principal(self, request: Request) -> Principal | Response:
        header = request.headers.get("authorization")
        if not header:
            return _unauthorized()
        return await run_in_threadpool(self._identify, header, _client(request))

    @staticmethod
    def _base_url(request: Request) -> str:
        root = str(request.scope.get("root_path", "")).rstrip("/")
        return f"{request.url.scheme}://{request.url.netloc}{root}"

    async def session(self, request: Request) -> Response:
        """GET /.well-known/jmap."""
        principal = await self._principal(request)
        if isinstance(principal, Response):
            return principal
        document = session_document(principal, self._base_url(request), self.config.limits)
        return JSONResponse(document, headers={"Cache-Control": "no-cache, no-store, private"})

    async def api(self, request: Request) -> Response:
        """POST /jmap/api (authentication, parsing and the calls in one worker thread)."""
        header = request.headers.get("authorization")
        if not header:
            return _unauthorized()
        body = await request.body()
        return await run_in_threadpool(self._api, header, body, _client(request))

    def _api(self, header: str, body: bytes, address: str | None = None) -> Response:
        principal = self._identify(header, address)
        if isinstance(principal, Response):
            return principal
        limits = self.config.limits
        user = principal.user_id
        with self._lock:
            if self._running[user] >= limits.max_concurrent_requests:
                return Problem(
                    LIMIT,
                    429,
                    f"More than maxConcurrentRequests ({limits.max_concurrent_requests}) "
                    "requests at once.",
                    limit="maxConcurrentRequests",
                ).response()
            self._running[user] += 1
        try:
            document = self.dispatcher.parse(body)
            answer = self.dispatcher.run(principal, document)
        except Problem as problem:
            return problem.response()
        finally:
            with self._lock:
                self._running[user] -= 1
                if self._running[user] <= 0:
                    del self._running[user]
        return JSONResponse(answer, headers={"Cache-Control": "no-store"})

    def _blob(self, user_id: int, blob: str) -> tuple[bytes, str, str | None] | None:
        parsed = ids.parse_blob(blob)
        if parsed is None:
            return None
        message_id, path = parsed
        with self.store.session() as session:
            data = session.scalar(
                select(Blob.data)
                .join(Message, Message.raw_sha256 == Blob.sha256)
                .where(Message.id == message_id, Message.user_id == user_id)
            )
        if data is None:
            return None
        if path is None:
            return data, "message/rfc822", None
        structure = parse_structure(message_id, data)
        part = find_part(structure, path)
        if part is None:
            return None
        return part_content(structure, part), part.ctype, part.filename

    async def download(self, request: Request) -> Response:
        """GET /jmap/download/{accountId}/{blobId}/{name}?accept=type."""
        principal = await self._principal(request)
        if isinstance(principal, Response):
            return principal
        params = request.path_params
        missing = Problem("about:blank", 404, "There is no such blob in this account.")
        if ids.parse_account(params["accountId"]) != principal.user_id:
            return missing.response()
        found = await run_in_threadpool(self._blob, principal.user_id, params["blobId"])
        if found is None:
            return missing.response()
        data, ctype, filename = found
        asked = request.query_params.get("accept") or request.query_params.get("type")
        media_type = asked if asked and _MEDIA_TYPE.fullmatch(asked) else ctype
        name = params.get("name") or filename or "download"
        return Response(
            data,
            media_type=media_type,
            headers={
                "Content-Disposition": f"attachment; filename*=UTF-8''{quote(name, safe='')}",
                "X-Content-Type-Options": "nosniff",
                "Content-Security-Policy": "sandbox; default-src 'none'",
                "Cache-Control": "private, immutable, max-age=31536000",
            },
        )

    async def upload(self, request: Request) -> Response:
        """POST /jmap/upload/{accountId}: not offered (maxSizeUpload is 0)."""
        principal = await self._principal(request)
        if isinstance(principal, Response):
            return principal
        return Problem(
            "about:blank",
            403,
            "mailroom does not accept uploads yet; nothing could use them (maxSizeUpload is 0).",
        ).response()

    async def eventsource(self, request: Request) -> Response:
        """GET /jmap/eventsource?types=&closeafter=&ping=."""
        principal = await self._principal(request)
        if isinstance(principal, Response):
            return principal
        query = request.query_params
        try:
            stream = parse_request(
                query.get("types"),
                query.get("closeafter"),
                query.get("ping"),
                request.headers.get("last-event-id"),
            )
        except Problem as problem:
            return problem.response()
        return StreamingResponse(
            event_stream(
                self.store,
                principal.user_id,
                stream,
                self.config.poll_interval,
                self.config.stopping,
            ),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )


def jmap_routes(
    store: Store, config: JmapConfig | None = None, auth: Authenticator | None = None
) -> list[BaseRoute]:
    """The JMAP routes, to add to a Starlette application (``auth`` shared with the web)."""
    server = JmapServer(store, config, auth)
    return [
        Route("/.well-known/jmap", server.session, methods=["GET"]),
        Route("/jmap/session", server.session, methods=["GET"]),
        Route("/jmap/api", server.api, methods=["POST"]),
        Route("/jmap/api/", server.api, methods=["POST"]),
        Route("/jmap/download/{accountId}/{blobId}/{name}", server.download, methods=["GET"]),
        Route("/jmap/upload/{accountId}", server.upload, methods=["POST"]),
        Route("/jmap/eventsource", server.eventsource, methods=["GET"]),
    ]
