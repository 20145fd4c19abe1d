"""Push over EventSource (RFC 8620 §7.3): ``StateChange`` events from the change log.

States live in the database, written in the same transaction as each
change, so every connection simply polls the user's push states (index
look-ups, ``jmap.push_states``: Email, Mailbox, Thread, EmailDelivery,
Identity, VacationResponse, EmailSubmission) every ``poll_interval`` seconds and sends one
``state`` event when any requested type moved. :func:`watch_states` is that
poll, shared with the WebSocket pushes (``jmap.websocket``). Everything committed in between —
one JMAP ``/set``, an ingest batch, a merge, or several of them — arrives as
one coalesced event with the newest states.

Event ids: each ``state`` event's id is the highest state it knows. Because
states are sequence numbers of one log, a type changed after event N iff
its state is now greater than N; a client reconnecting with
``Last-Event-ID: N`` therefore immediately gets an event for exactly the
types that moved while it was away. A fresh connection first sends a bare
``id:`` line (no event) so even a client that saw no event can resume.

A user has at most ``max_push_streams`` streams open at once
(:class:`StreamSlots`; ``JmapConfig``): each one is a connection and a
poll, so the next one is a 429 ``limit`` problem until one closes.

``types`` is ``*`` or a comma list (unknown names are ignored, as RFC 8620
allows); ``closeafter=state`` ends the response after the first state
event; ``ping`` (seconds, clamped to 1..3600, 0 = none) sends
``ping`` events carrying ``{"interval": N}`` when nothing else was sent.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from mailroom.jmap import ids
from mailroom.jmap.errors import LIMIT, Problem
from mailroom.jmap.push_states import PUSH_TYPES, push_states
from mailroom.jmap.request_slots import UserSlots
from mailroom.jmap.threadwork import in_thread
from mailroom.store.engine import Store

MIN_PING, MAX_PING = 1, 3600


@dataclass(frozen=True, slots=True)
class StreamRequest:
    """The parsed query of one event-source connection."""

    types: tuple[str, ...]
    close_after_state: bool
    ping: int
    last_event_id: int | None


def parse_request(
    types: str | None, closeafter: str | None, ping: str | None, last_event_id: str | None
) -> StreamRequest:
    """Check the event-source URL variables; a Problem (400) if malformed."""
    chosen: tuple[str, ...] = PUSH_TYPES
    if types is not None and types.strip() not in ("", "*"):
        chosen = tuple(t for t in PUSH_TYPES if t in {p.strip() for p in types.split(",")})
    if closeafter not in (None, "", "state", "no"):
        raise Problem("about:blank", 400, "closeafter must be state or no.")
    try:
        interval = int(ping) if ping not in (None, "") else 0
    except ValueError:
        raise Problem("about:blank", 400, "ping must be a number of seconds.") from None
    if interval < 0:
        raise Problem("about:blank", 400, "ping must not be negative.")
    if interval:
        interval = min(max(interval, MIN_PING), MAX_PING)
    resume = int(last_event_id) if last_event_id and last_event_id.strip().isdigit() else None
    return StreamRequest(chosen, closeafter == "state", interval, resume)


def _too_many_streams(most: int) -> Problem:
    return Problem(
        LIMIT,
        429,
        f"At most {most} push (EventSource) connections per user are open at once; "
        "close one first.",
        limit="maxConcurrentPushStreams",
    )


class StreamSlots(UserSlots):
    """How many push streams each user has open, at most ``per_user``."""

    def __init__(self, per_user: int) -> None:
        super().__init__(per_user, _too_many_streams)


class CountedStream(StreamingResponse):
    """A streaming response that calls ``release`` once it has ended, however it ended."""

    def __init__(self, content: Any, release: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._release: Callable[[], None] | None = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


def _state_event(account: str, changed: dict[str, int], event_id: int) -> str:
    payload = {
        "@type": "StateChange",
        "changed": {account: {name: str(state) for name, state in changed.items()}},
    }
    return f"event: state\nid: {event_id}\ndata: {json.dumps(payload)}\n\n"


def _ping_event(interval: int) -> str:
    return f"event: ping\ndata: {json.dumps({'interval': interval})}\n\n"


async def watch_states(
    store: Store,
    user_id: int,
    types: tuple[str, ...],
    poll_interval: float,
    stopping: threading.Event | None = None,
    since: int | None = None,
) -> AsyncIterator[tuple[dict[str, int], dict[str, int]]]:
    """Once per poll: the types (of ``types``) whose state moved (often none), and all states.

    With ``since`` (a push state or event id: the highest state the client
    knew), the first item holds every type whose state is now beyond it.
    Otherwise the first item is empty: the current states are the baseline.
    Ends when ``stopping`` is set.
    """

    def read() -> dict[str, int]:
        with store.session() as session:
            return push_states(session, user_id)

    states = await in_thread(read)
    known = {name: states[name] for name in types}
    yield {name: s for name, s in known.items() if since is not None and s > since}, dict(known)
    while True:
        await asyncio.sleep(poll_interval)
        if stopping is not None and stopping.is_set():
            return
        states = await in_thread(read)
        moved = {name: states[name] for name in types if states[name] != known[name]}
        known.update(moved)
        yield moved, dict(known)


async def event_stream(
    store: Store,
    user_id: int,
    request: StreamRequest,
    poll_interval: float,
    stopping: threading.Event | None = None,
) -> AsyncIterator[str]:
    """The text of the event stream, until the client leaves (or after one state event).

    The stream also ends when ``stopping`` is set (the server is shutting down).
    """
    account = ids.account_id(user_id)
    last_sent = time.monotonic()
    first = True
    watched = watch_states(
        store, user_id, request.types, poll_interval, stopping, request.last_event_id
    )
    async for moved, known in watched:
        now = time.monotonic()
        newest = max(known.values(), default=0)
        if first:
            first = False
            if not moved:
                if request.last_event_id is not None:
                    yield f"id: {request.last_event_id}\n\n"
                else:
                    yield f"retry: 1000\nid: {newest}\n\n"
                continue
        if moved:
            yield _state_event(account, moved, newest)
            last_sent = now
            if request.close_after_state:
                return
        elif request.ping and now - last_sent >= request.ping:
            yield _ping_event(request.ping)
            last_sent = now
