"""JMAP over WebSocket (RFC 8887) at ``/jmap/ws``.

The upgrade request is authenticated like every endpoint (Basic or bearer;
otherwise the HTTP answer is 401 with both challenges, or 429 while locked
out), must offer the ``jmap`` subprotocol (else 400) and passes the same
Origin rule (403 for another site's page unless allow-listed). Then every
text message is one JSON object with an ``@type``:

* ``Request`` (optional ``id``): run like an HTTP API request and answered
  with a ``Response`` carrying ``requestId``; requests run concurrently, at
  most ``maxConcurrentRequests`` per user together with HTTP ones, and
  responses may arrive out of order;
* ``WebSocketPushEnable`` (``dataTypes``: type names or null for all;
  ``pushState``: optional) starts ``StateChange`` pushes, each with a
  ``pushState``; given the ``pushState`` of an earlier push, the types that
  moved since arrive at once; ``WebSocketPushDisable`` stops them. The next
  message is read only once the push has read the states it compares with,
  so every change committed after that is pushed.

Anything else is answered with a ``RequestError`` (``requestId`` when the
message had an ``id``): a message over ``maxSizeRequest`` is ``limit``,
text that is not I-JSON and binary frames are ``notJSON``, an object that is
not one of the above is ``notRequest``.

A socket ends only after its running requests and pushes have (their
database work in threads included, ``jmap.threadwork``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from mailroom.jmap import ids
from mailroom.jmap.auth import Principal
from mailroom.jmap.cors import OriginPolicy, normalize_origin
from mailroom.jmap.dispatcher import Dispatcher, decode_ijson, request_too_large
from mailroom.jmap.errors import NOT_JSON, NOT_REQUEST, Problem
from mailroom.jmap.push import watch_states
from mailroom.jmap.push_states import PUSH_TYPES
from mailroom.jmap.request_slots import RequestSlots
from mailroom.jmap.threadwork import in_thread
from mailroom.store.engine import Store

SUBPROTOCOL = "jmap"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WebSocketSide:
    """What the WebSocket endpoint shares with the HTTP ones."""

    store: Store
    dispatcher: Dispatcher
    slots: RequestSlots
    origins: OriginPolicy
    identify: Callable[[str | None, str | None], Principal | Response]
    poll_interval: float
    stopping: threading.Event


def _foreign_origin(websocket: WebSocket, origins: OriginPolicy) -> bool:
    given = websocket.headers.get("origin")
    if given is None:
        return False
    origin = normalize_origin(given)
    scheme = "https" if websocket.url.scheme == "wss" else "http"
    own = normalize_origin(f"{scheme}://{websocket.url.netloc}")
    return origin is None or (origin != own and origin not in origins.allowed)


def _request_error(problem: Problem, request_id: object) -> dict[str, Any]:
    return {"@type": "RequestError", "requestId": request_id, **problem.document()}


class Connection:
    """One open JMAP WebSocket of one user."""

    def __init__(self, side: WebSocketSide, websocket: WebSocket, principal: Principal) -> None:
        self.side = side
        self.websocket = websocket
        self.principal = principal
        self._send_lock = asyncio.Lock()
        self._push: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # requests and pushes still running

    async def send(self, message: dict[str, Any]) -> None:
        """Send one JSON message (one writer at a time); nothing if the client has left."""
        async with self._send_lock:
            try:
                await self.websocket.send_text(json.dumps(message))
            except (WebSocketDisconnect, RuntimeError, OSError):
                log.info("JMAP WebSocket client left before an answer could be sent")

    async def run(self) -> None:
        """Answer messages until the client closes the socket or the server stops."""
        try:
            while not self.side.stopping.is_set():
                message = await self.websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                if message.get("text") is not None:
                    await self.on_text(message["text"])
                else:
                    problem = Problem(NOT_JSON, 400, "Send JMAP messages as text frames.")
                    await self.send(_request_error(problem, None))
        except WebSocketDisconnect:
            return
        finally:
            # The socket ends only after its requests and pushes (their threads included).
            running = list(self._tasks)
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def on_text(self, text: str) -> None:
        """Dispatch one text message by its ``@type``."""
        raw = text.encode("utf-8", "surrogatepass")
        request_id: object = None
        try:
            if len(raw) > self.side.dispatcher.limits.max_size_request:
                raise request_too_large(self.side.dispatcher.limits.max_size_request)
            document = await in_thread(decode_ijson, raw)  # big ones off the loop
            if not isinstance(document, dict):
                raise Problem(NOT_REQUEST, 400, "A JMAP WebSocket message is a JSON object.")
            request_id = document.get("id") if isinstance(document.get("id"), str) else None
            kind = document.get("@type")
            if kind == "Request":
                user = self.principal.user_id
                self.side.slots.take(user)
                task = self._spawn(self.answer(raw, request_id))
                # Given back when the task ends however it ends (even cancelled unstarted).
                task.add_done_callback(lambda _task: self.side.slots.give_back(user))
            elif kind == "WebSocketPushEnable":
                await self.enable_push(document)
            elif kind == "WebSocketPushDisable":
                self.disable_push()
            else:
                raise Problem(
                    NOT_REQUEST,
                    400,
                    "@type must be Request, WebSocketPushEnable or WebSocketPushDisable.",
                )
        except Problem as problem:
            await self.send(_request_error(problem, request_id))

    async def answer(self, raw: bytes, request_id: object) -> None:
        """Run one Request (its slot is taken and given back by :meth:`on_text`); answer it."""
        try:
            result = await in_thread(self._run, raw)
        except Problem as problem:
            await self.send(_request_error(problem, request_id))
            return
        answer = {"@type": "Response", **result}
        if request_id is not None:  # RFC 8887 §4.3.2: requestId when the Request had an id
            answer["requestId"] = request_id
        await self.send(answer)

    def _run(self, raw: bytes) -> dict[str, Any]:
        """Parse and run a Request in a worker thread, like the HTTP API does."""
        return self.side.dispatcher.run(self.principal, self.side.dispatcher.parse(raw))

    async def enable_push(self, document: dict[str, Any]) -> None:
        """Start (or restart) StateChange pushes for ``dataTypes``.

        Returns once the states to compare with are read: whatever is committed
        after the next message was taken is pushed.
        """
        types = document.get("dataTypes")
        state = document.get("pushState")
        if types is not None and (
            not isinstance(types, list) or not all(isinstance(t, str) for t in types)
        ):
            raise Problem(NOT_REQUEST, 400, "dataTypes must be a list of type names or null.")
        if state is not None and not isinstance(state, str):
            raise Problem(NOT_REQUEST, 400, "pushState must be a string.")
        chosen = PUSH_TYPES if types is None else tuple(t for t in PUSH_TYPES if t in types)
        since = int(state) if state and state.isdigit() and len(state) < 19 else None
        self.disable_push()
        baseline: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._push = self._spawn(self.push(chosen, since, baseline))
        await asyncio.wait({baseline, self._push}, return_when=asyncio.FIRST_COMPLETED)

    def disable_push(self) -> None:
        """Stop StateChange pushes."""
        if self._push is not None:
            self._push.cancel()
            self._push = None

    async def push(
        self, types: tuple[str, ...], since: int | None, baseline: asyncio.Future[None]
    ) -> None:
        """Send a StateChange whenever one of ``types`` moves (``baseline`` done once read)."""
        account = ids.account_id(self.principal.user_id)
        watched = watch_states(
            self.side.store,
            self.principal.user_id,
            types,
            self.side.poll_interval,
            self.side.stopping,
            since,
        )
        async for moved, known in watched:
            if not baseline.done():
                baseline.set_result(None)
            if moved:
                await self.send(
                    {
                        "@type": "StateChange",
                        "changed": {account: {t: str(s) for t, s in moved.items()}},
                        "pushState": str(max(known.values(), default=0)),
                    }
                )


async def serve_websocket(side: WebSocketSide, websocket: WebSocket) -> None:
    """The ``/jmap/ws`` endpoint: check the upgrade, accept with ``jmap``, then converse."""
    if _foreign_origin(websocket, side.origins):
        problem = Problem("about:blank", 403, "This origin may not use JMAP here.")
        await websocket.send_denial_response(problem.response())
        return
    if SUBPROTOCOL not in websocket.scope.get("subprotocols", []):
        problem = Problem("about:blank", 400, "Offer the jmap subprotocol (RFC 8887).")
        await websocket.send_denial_response(problem.response())
        return
    header = websocket.headers.get("authorization")
    client = websocket.client.host if websocket.client else None
    principal = await in_thread(side.identify, header, client)
    if isinstance(principal, Response):
        await websocket.send_denial_response(principal)
        return
    await websocket.accept(subprotocol=SUBPROTOCOL)
    await Connection(side, websocket, principal).run()
