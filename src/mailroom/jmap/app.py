"""The JMAP HTTP endpoints, added to the web application by ``jmap_routes``.

=================================================  ==========================
``GET  /.well-known/jmap``                          the Session (RFC 8620 §2)
``POST /jmap/api``                                  API requests (§3)
``GET  /jmap/download/{accountId}/{blobId}/{name}`` raw messages and parts (§6.2)
``POST /jmap/upload/{accountId}``                   blob upload (§6.1)
``GET  /jmap/eventsource``                          push (§7.3, ``jmap.push``)
``GET  /jmap/ws``                                   JMAP over WebSocket (RFC 8887)
=================================================  ==========================

Every endpoint needs HTTP Basic (user and password) or a bearer token (the
push stream also takes the web page's session cookie, ``cookie_user``); the
answer to anything else is 401 with both challenges, and 429 with
``Retry-After`` while the name or client address is locked out after too
many wrong passwords (``jmap.auth``). A user only ever
reaches their own account: another account id is ``accountNotFound`` /
404, another user's object ids are ``notFound``. Database work runs in the
thread pool, so open push streams never wait behind a slow query.

A request whose ``Origin`` is another site's is refused (403) unless the
operator allow-lists it (``jmap.cors``); API bodies must be
``application/json`` (``notJSON`` otherwise) and at most maxSizeRequest,
checked before they are read. A client that leaves mid-body costs one log
line. Each user has at most ``max_push_streams`` push streams open.

Downloads are served as attachments with ``X-Content-Type-Options:
nosniff`` and a ``sandbox`` Content-Security-Policy, whatever type the
client asked for: a message part is the sender's content and must never
run as this site's page. Raw messages stream from the database in chunks
(:data:`DOWNLOAD_CHUNK` bytes per query) with their exact Content-Length.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from urllib.parse import quote

from sqlalchemy import func, select
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from mailroom.jmap import ids
from mailroom.jmap.auth import Authenticator, LockedOut, Principal
from mailroom.jmap.blobs import FoundBlob, find_blob
from mailroom.jmap.cors import Endpoint, OriginPolicy
from mailroom.jmap.dispatcher import Dispatcher, Limits, check_media_type, request_too_large
from mailroom.jmap.errors import Problem
from mailroom.jmap.methods import METHODS, email_submission, push_subscription
from mailroom.jmap.push import CountedStream, StreamSlots, event_stream, parse_request
from mailroom.jmap.push_policy import PushPolicy
from mailroom.jmap.request_slots import RequestSlots
from mailroom.jmap.session import CAPABILITIES, session_document, session_state
from mailroom.jmap.submission_policy import SubmissionPolicy
from mailroom.jmap.uploads import (
    UploadSlots,
    read_limited,
    store_upload,
    upload_media_type,
    upload_too_large,
)
from mailroom.jmap.websocket import WebSocketSide, serve_websocket
from mailroom.store.engine import Store
from mailroom.store.models import Blob

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
    # Web pages on these origins may use JMAP (CORS); MAILROOM_CORS_ORIGINS.
    cors_origins: tuple[str, ...] = ()
    max_push_streams: int = 8  # open EventSource connections per user
    # Push subscriptions (RFC 8620 §7.2): https only, the SSRF guard's allow-list.
    push: PushPolicy = field(default_factory=PushPolicy)
    # Sending (RFC 8621 §7): the settings queue_message needs, the undo window, the limits.
    submission: SubmissionPolicy = field(default_factory=SubmissionPolicy)
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


# An upload refused before its body was read closes the connection: the unread
# body must not be taken for the next request.
_UNREAD_BODY = {"Connection": "close"}

# Bytes per database read of a streamed raw-message download.
DOWNLOAD_CHUNK = 256 * 1024

# The user a request's web session cookie signs in (None: no live session); run in
# a worker thread. Only the push stream takes it: it reads nothing but states.
CookieUser = Callable[[Request], int | None]


def _peer(request: Request) -> str:
    return f"{request.client.host}:{request.client.port}" if request.client else "(unknown)"


class JmapServer:
    """The JMAP endpoints over one store."""

    def __init__(
        self,
        store: Store,
        config: JmapConfig | None = None,
        auth: Authenticator | None = None,
        cookie_user: CookieUser | None = None,
    ) -> None:
        self.store = store
        self.config = config or JmapConfig()
        self.auth = auth or Authenticator(store)
        self.cookie_user = cookie_user
        limits = self.config.limits
        submission = self.config.submission
        methods = {
            **METHODS,
            **push_subscription.methods(self.config.push),
            **email_submission.methods(submission),
        }
        self.dispatcher = Dispatcher(
            store, methods, CAPABILITIES, limits, lambda p: session_state(p, limits, submission)
        )
        self._requests = RequestSlots(limits.max_concurrent_requests)
        self._streams = StreamSlots(self.config.max_push_streams)
        self._uploads = UploadSlots(self.config.limits.max_concurrent_upload)

    def _identify(self, header: str | None, address: str | None) -> Principal | Response:
        """The principal, or the 401/429 answer to send instead."""
        if not header:
            return _unauthorized()
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
        document = session_document(
            principal, self._base_url(request), self.config.limits, self.config.submission
        )
        return JSONResponse(document, headers={"Cache-Control": "no-cache, no-store, private"})

    async def api(self, request: Request) -> Response:
        """POST /jmap/api (authentication, parsing and the calls in one worker thread)."""
        header = request.headers.get("authorization")
        if not header:
            return _unauthorized()
        try:
            check_media_type(request.headers.get("content-type"))
            body = await self._read_body(request)
        except Problem as problem:
            return problem.response()
        except ClientDisconnect:
            # Nobody is left to answer; one line instead of a traceback.
            log.info("JMAP client %s left before sending its whole request", _peer(request))
            return Response(status_code=499)
        return await run_in_threadpool(self._api, header, body, _client(request))

    def _api(self, header: str, body: bytes, address: str | None = None) -> Response:
        principal = self._identify(header, address)
        if isinstance(principal, Response):
            return principal
        user = principal.user_id
        try:
            self._requests.take(user)
        except Problem as problem:
            return problem.response()
        try:
            document = self.dispatcher.parse(body)
            answer = self.dispatcher.run(principal, document)
        except Problem as problem:
            return problem.response()
        finally:
            self._requests.give_back(user)
        return JSONResponse(answer, headers={"Cache-Control": "no-store"})

    async def _read_body(self, request: Request) -> bytes:
        """The body, refused before it is read (or as soon as it grows) past maxSizeRequest."""
        return await read_limited(
            request.stream(),
            request.headers.get("content-length"),
            self.config.limits.max_size_request,
            request_too_large,
        )

    def _blob(self, user_id: int, blob: str) -> FoundBlob | None:
        """What a blob id names for this user (``jmap.blobs``)."""
        with self.store.session() as session:
            return find_blob(session, user_id, blob)

    def _chunk(self, sha256: str, offset: int) -> bytes:
        """DOWNLOAD_CHUNK bytes of a raw message from ``offset`` (substr counts from 1)."""
        with self.store.session() as session:
            data = session.scalar(
                select(func.substr(Blob.data, offset + 1, DOWNLOAD_CHUNK)).where(
                    Blob.sha256 == sha256
                )
            )
        return bytes(data or b"")

    async def _stream(self, found: FoundBlob) -> AsyncIterator[bytes]:
        if found.content is not None:
            view = memoryview(found.content)
            for start in range(0, len(view), DOWNLOAD_CHUNK):
                yield bytes(view[start : start + DOWNLOAD_CHUNK])
            return
        assert found.sha256 is not None
        offset = 0
        while offset < found.size:
            chunk = await run_in_threadpool(self._chunk, found.sha256, offset)
            if not chunk:  # the blob went away meanwhile: the client sees a short body
                return
            yield chunk
            offset += len(chunk)

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
        asked = request.query_params.get("accept") or request.query_params.get("type")
        media_type = asked if asked and _MEDIA_TYPE.fullmatch(asked) else found.media_type
        name = params.get("name") or found.filename or "download"
        return StreamingResponse(
            self._stream(found),
            media_type=media_type,
            headers={
                "Content-Length": str(found.size),
                "Content-Disposition": f"attachment; filename*=UTF-8''{quote(name, safe='')}",
                "X-Content-Type-Options": "nosniff",
                "Content-Security-Policy": "sandbox; default-src 'none'",
                "Cache-Control": "private, immutable, max-age=31536000",
            },
        )

    async def upload(self, request: Request) -> Response:
        """POST /jmap/upload/{accountId}: store the body as a blob of the user (RFC 8620 §6.1)."""
        principal = await self._principal(request)
        if isinstance(principal, Response):
            return principal
        account = request.path_params["accountId"]
        if ids.parse_account(account) != principal.user_id:
            missing = Problem("about:blank", 404, "There is no such account.")
            return missing.response(headers=_UNREAD_BODY)
        user = principal.user_id
        limits = self.config.limits
        try:
            self._uploads.take(user)
        except Problem as problem:
            return problem.response(headers=_UNREAD_BODY)
        try:
            data = await read_limited(
                request.stream(),
                request.headers.get("content-length"),
                limits.max_size_upload,
                upload_too_large,
            )
            media_type = upload_media_type(request.headers.get("content-type"))
            stored = await run_in_threadpool(store_upload, self.store, user, data, media_type)
        except Problem as problem:
            return problem.response(headers=_UNREAD_BODY)
        except ClientDisconnect:
            log.info("JMAP client %s left before sending its whole upload", _peer(request))
            return Response(status_code=499)
        finally:
            self._uploads.give_back(user)
        return JSONResponse(
            {
                "accountId": account,
                "blobId": ids.upload_blob_id(stored.sha256),
                "type": stored.media_type,
                "size": stored.size,
            },
            status_code=201,
            headers={"Cache-Control": "no-store"},
        )

    async def _stream_user(self, request: Request) -> int | Response:
        """The push stream's user: the ``Authorization`` header's or, without one,
        the web page's session cookie's (``cookie_user``), else the 401 answer."""
        if self.cookie_user is not None and not request.headers.get("authorization"):
            user_id = await run_in_threadpool(self.cookie_user, request)
            if user_id is not None:
                return user_id
        principal = await self._principal(request)
        return principal if isinstance(principal, Response) else principal.user_id

    async def eventsource(self, request: Request) -> Response:
        """GET /jmap/eventsource?types=&closeafter=&ping=."""
        user_id = await self._stream_user(request)
        if isinstance(user_id, Response):
            return user_id
        query = request.query_params
        try:
            stream = parse_request(
                query.get("types"),
                query.get("closeafter"),
                query.get("ping"),
                request.headers.get("last-event-id"),
            )
            self._streams.take(user_id)
        except Problem as problem:
            return problem.response()
        return CountedStream(
            event_stream(
                self.store,
                user_id,
                stream,
                self.config.poll_interval,
                self.config.stopping,
            ),
            lambda: self._streams.give_back(user_id),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )


def jmap_routes(
    store: Store,
    config: JmapConfig | None = None,
    auth: Authenticator | None = None,
    cookie_user: CookieUser | None = None,
) -> list[BaseRoute]:
    """The JMAP routes, to add to a Starlette application (``auth`` shared with the web;
    ``cookie_user`` lets the web page's session open the push stream)."""
    server = JmapServer(store, config, auth, cookie_user)
    policy = OriginPolicy(server.config.cors_origins)
    side = WebSocketSide(
        store,
        server.dispatcher,
        server._requests,
        policy,
        server._identify,
        server.config.poll_interval,
        server.config.stopping,
    )

    async def websocket(socket: WebSocket) -> None:
        await serve_websocket(side, socket)

    def route(path: str, endpoint: Endpoint, method: str) -> Route:
        # Every JMAP endpoint is behind the Origin rule, and answers the CORS preflight.
        return Route(path, policy.guard(endpoint, [method]), methods=[method, "OPTIONS"])

    return [
        route("/.well-known/jmap", server.session, "GET"),
        route("/jmap/session", server.session, "GET"),
        route("/jmap/api", server.api, "POST"),
        route("/jmap/api/", server.api, "POST"),
        route("/jmap/download/{accountId}/{blobId}/{name}", server.download, "GET"),
        route("/jmap/upload/{accountId}", server.upload, "POST"),
        route("/jmap/eventsource", server.eventsource, "GET"),
        WebSocketRoute("/jmap/ws", websocket),
    ]
