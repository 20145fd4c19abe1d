"""The emulator's HTTP side and its scripting API: :class:`GraphEmulator`.

Real HTTP/1.1 on 127.0.0.1 (a thread per connection). Paths:

* ``/{tenant}/oauth2/v2.0/authorize`` and ``/token`` — :mod:`.oauth`;
* ``/v1.0/...`` — :mod:`.routes` and ``/v1.0/$batch`` (:mod:`.batch`), with a
  bearer token naming the mailbox.

The order a Graph request goes through, as the service does it:

1. the bearer token (missing, unknown or expired: ``401 InvalidAuthenticationToken``);
2. the mailbox's in-flight count: a request arriving while
   :attr:`GraphEmulator.concurrency_limit` (4) are in flight is answered ``429
   ApplicationThrottled`` (MailboxConcurrency) with ``Retry-After``; the highest
   count ever seen is :meth:`GraphEmulator.peak_in_flight`;
3. the scripted latency and the hold gate (while counted in flight);
4. scripted throttling (:meth:`GraphEmulator.throttle_next`: 429 or 503 with a
   ``Retry-After`` that may be fractional) — per request, and per part of a
   ``$batch`` (the batch itself is not throttled, so its parts can be 429s);
5. the route.

Every request (and every batch part) is appended to :attr:`GraphEmulator.requests`.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.emulators.graph.batch import error_reply, run_batch
from tests.emulators.graph.delta import DeltaTracker
from tests.emulators.graph.errors import GraphError, expired_access_token, mailbox_concurrency
from tests.emulators.graph.errors import throttled as throttled_error
from tests.emulators.graph.mailbox import Mailbox, Message
from tests.emulators.graph.oauth import OAuthError, TokenIssuer
from tests.emulators.graph.routes import Call, Reply, dispatch

DEFAULT_ADDRESS = "user@example.com"
CONCURRENCY_LIMIT = 4
CONCURRENCY_RETRY_AFTER = "0.1"


@dataclass(frozen=True)
class LoggedRequest:
    """One request the emulator answered (``batch_part``: one part of a $batch)."""

    method: str
    path: str
    query: dict[str, str]
    status: int
    mailbox: str | None
    prefer: str
    batch_part: bool = False


@dataclass(frozen=True)
class Throttle:
    """A scripted refusal: status (429/503), Retry-After text, optional error code."""

    status: int
    retry_after: str
    code: str | None = None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], emulator: GraphEmulator) -> None:
        self.emulator = emulator
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.connections_lock:
            self.connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.connections_lock:
            self.connections.discard(request)
        super().shutdown_request(request)

    def drop_connections(self) -> None:
        """End the connections still open (clients that keep them alive)."""
        with self.connections_lock:
            open_ones = list(self.connections)
        for sock in open_ones:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 60
    # Headers and body go out in two writes: with Nagle's algorithm the body waits for
    # the client's delayed ACK of the headers, 40 ms on every keep-alive answer.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the stdlib name)
        pass

    def do_GET(self) -> None:  # noqa: N802 (the http.server names)
        self._handle()

    def do_POST(self) -> None:  # noqa: N802
        self._handle()

    def do_PATCH(self) -> None:  # noqa: N802
        self._handle()

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle()

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            status, reply_headers, payload = self.server.emulator.answer(
                self.command, self.path, headers, body
            )
        except Exception:  # an emulator bug: say so, as a 500, and keep serving
            traceback.print_exc()
            status, reply_headers, payload = 500, {"Content-Type": "text/plain"}, b"emulator bug"
        self.send_response(status)
        for name, value in reply_headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def _encode(reply: Reply) -> tuple[int, dict[str, str], bytes]:
    headers = dict(reply.headers)
    if reply.body is None:
        payload = b""
    elif isinstance(reply.body, bytes):
        payload = reply.body
        headers.setdefault("Content-Type", "application/octet-stream")
    else:
        payload = json.dumps(reply.body).encode()
        headers.setdefault("Content-Type", "application/json; odata.metadata=minimal")
    headers.setdefault("request-id", f"emulator-{time.monotonic_ns()}")
    headers.setdefault("Date", formatdate(usegmt=True))
    return reply.status, headers, payload


class GraphEmulator:
    """A Microsoft Graph mail service on 127.0.0.1, scriptable by tests.

    Use as a context manager (or ``start()`` / ``stop()``). One mailbox,
    :data:`DEFAULT_ADDRESS`, exists from the start; :meth:`add_mailbox` adds more.
    The scripting methods act on the default mailbox unless ``address`` is given.
    """

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, address: str = DEFAULT_ADDRESS
    ) -> None:
        self.host = host
        self.port = port
        self.default_address = address.lower()
        self.mailboxes: dict[str, Mailbox] = {}
        self.deltas: dict[str, DeltaTracker] = {}
        self.oauth = TokenIssuer(self.default_address)
        self.oauth.register_client("mailroom-test")
        self.requests: list[LoggedRequest] = []
        self.latency = 0.0
        self.concurrency_limit = CONCURRENCY_LIMIT
        self._lock = threading.Lock()
        self._in_flight: dict[str, int] = {}
        self._peak: dict[str, int] = {}
        self._throttles: deque[Throttle | None] = deque()  # None lets one request through
        self._gate = threading.Event()
        self._gate.set()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.add_mailbox(self.default_address)

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> GraphEmulator:
        """Listen and serve in a background thread."""
        self._server = _Server((self.host, self.port), self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="graph-emulator",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and drop the connections still open."""
        self._gate.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.drop_connections()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> GraphEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (the identity endpoints live under it too)."""
        return f"http://{self.host}:{self.port}"

    @property
    def graph_url(self) -> str:
        """The Graph root a client is configured with: ``<base>/v1.0``."""
        return f"{self.base_url}/v1.0"

    def token_url(self, tenant: str = "common") -> str:
        """The v2.0 token endpoint."""
        return f"{self.base_url}/{tenant}/oauth2/v2.0/token"

    def authorize_url(self, tenant: str = "common") -> str:
        """The v2.0 authorize endpoint."""
        return f"{self.base_url}/{tenant}/oauth2/v2.0/authorize"

    # -- mailboxes and tokens --------------------------------------------------

    def add_mailbox(self, address: str) -> Mailbox:
        """A new empty mailbox (the well-known folders only)."""
        mailbox = Mailbox(address.lower())
        with self._lock:
            self.mailboxes[mailbox.address] = mailbox
            self.deltas[mailbox.address] = DeltaTracker(mailbox)
        return mailbox

    def mailbox(self, address: str | None = None) -> Mailbox:
        """A mailbox by address (the default one if None)."""
        return self.mailboxes[(address or self.default_address).lower()]

    def delta(self, address: str | None = None) -> DeltaTracker:
        """The delta bookkeeping of a mailbox (scripted page imperfections live here)."""
        return self.deltas[(address or self.default_address).lower()]

    def issue_tokens(self, address: str | None = None) -> dict[str, Any]:
        """An access and refresh token for a mailbox, without the browser step."""
        return self.oauth.issue((address or self.default_address).lower())

    def expire_access_tokens(self) -> None:
        """Every access token issued so far answers 401 from now on."""
        self.oauth.expire_access_tokens()

    def revoke_refresh_tokens(self) -> None:
        """Every refresh token issued so far is refused from now on."""
        self.oauth.revoke_refresh_tokens()

    # -- scripting: messages -----------------------------------------------------

    def add_message(
        self, raw: bytes, folder: str = "inbox", *, address: str | None = None, **options: Any
    ) -> Message:
        """Deliver raw MIME into a folder (see :meth:`Mailbox.add` for the options)."""
        return self.mailbox(address).add(raw, folder, **options)

    def move_message(self, ref: str, destination: str, *, address: str | None = None) -> Message:
        """Move a message as another client would (new REST id)."""
        return self.mailbox(address).move(ref, destination)

    def delete_message(
        self, ref: str, *, permanent: bool = True, address: str | None = None
    ) -> None:
        """Delete a message (for good by default; else to Deleted Items)."""
        self.mailbox(address).delete(ref, permanent=permanent)

    def mark_read(self, ref: str, read: bool = True, *, address: str | None = None) -> Message:
        """Mark a message read or unread."""
        return self.mailbox(address).update(ref, is_read=read)

    def flag(self, ref: str, status: str = "flagged", *, address: str | None = None) -> Message:
        """Set a message's flag status (notFlagged, flagged, complete)."""
        return self.mailbox(address).update(ref, flag_status=status)

    def categorize(self, ref: str, categories: list[str], *, address: str | None = None) -> Message:
        """Replace a message's categories."""
        return self.mailbox(address).update(ref, categories=categories)

    def expire_delta_tokens(
        self, folder: str | None = None, form: str = "410", *, address: str | None = None
    ) -> int:
        """Refuse the delta and skip tokens of a folder (all if None): "410" or "400" form."""
        folder_id = self.mailbox(address).folder(folder).id if folder else None
        return self.delta(address).expire(folder_id, form)

    # -- scripting: the service -------------------------------------------------

    def throttle_next(
        self, count: int = 1, status: int = 429, retry_after: str = "1", *, after: int = 0
    ) -> None:
        """Refuse ``count`` requests (or batch parts) with 429/503 and Retry-After.

        ``after`` lets that many through first; scripts queue up in the order given.
        """
        with self._lock:
            self._throttles.extend(None for _ in range(after))
            self._throttles.extend(Throttle(status, retry_after) for _ in range(count))

    def set_latency(self, seconds: float) -> None:
        """Hold every Graph request this long (counted in flight meanwhile)."""
        self.latency = seconds

    def hold(self) -> None:
        """Keep every Graph request in flight until :meth:`release`."""
        self._gate.clear()

    def release(self) -> None:
        """Let held requests answer."""
        self._gate.set()

    def in_flight(self, address: str | None = None) -> int:
        """Requests of a mailbox being answered now."""
        with self._lock:
            return self._in_flight.get((address or self.default_address).lower(), 0)

    def peak_in_flight(self, address: str | None = None) -> int:
        """The most requests of a mailbox ever in flight at once (rejected ones included)."""
        with self._lock:
            return self._peak.get((address or self.default_address).lower(), 0)

    def graph_requests(self, *, parts: bool = True) -> list[LoggedRequest]:
        """The logged Graph requests (``parts``: with the parts of batches)."""
        with self._lock:
            return [r for r in self.requests if parts or not r.batch_part]

    # -- answering -----------------------------------------------------------------

    def answer(
        self, method: str, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """Answer one HTTP request: status, headers, body."""
        url = urlsplit(target)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        segments = url.path.split("/")
        if len(segments) == 5 and segments[2:4] == ["oauth2", "v2.0"]:
            return self._identity(method, segments[4], query, body)
        if not url.path.startswith("/v1.0/"):
            return _encode(error_reply(GraphError(404, "NotFound", "No such endpoint.")))
        address = self._bearer(headers)
        # an unsigned call is only logged, never routed: the default mailbox stands in
        call = Call(
            self.mailbox(address),
            self.delta(address),
            method,
            url.path[len("/v1.0") :],
            query,
            headers,
            body,
            self.graph_url,
        )
        if address is None:
            reply = error_reply(expired_access_token())
        else:
            reply = self._admitted(call, address)
        self._log(call, reply.status, address)
        return _encode(reply)

    def _admitted(self, call: Call, address: str) -> Reply:
        """The reply to a signed-in call, counted in flight while it is answered."""
        with self._lock:
            count = self._in_flight.get(address, 0) + 1
            self._in_flight[address] = count
            self._peak[address] = max(self._peak.get(address, 0), count)
        try:
            if count > self.concurrency_limit:
                return error_reply(mailbox_concurrency(CONCURRENCY_RETRY_AFTER))
            if self.latency:
                time.sleep(self.latency)
            self._gate.wait()
            if call.path == "/$batch" and call.method == "POST":
                return run_batch(call, self._part)
            return self._part(call, logged=False)
        except GraphError as error:
            return error_reply(error)
        finally:
            with self._lock:
                self._in_flight[address] -= 1

    def _bearer(self, headers: dict[str, str]) -> str | None:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        return self.oauth.mailbox_of(token.strip())

    def _part(self, call: Call, logged: bool = True) -> Reply:
        """One request or batch part: scripted throttling, then the route."""
        refusal = self._next_throttle()
        try:
            reply = error_reply(refusal) if refusal is not None else dispatch(call)
        except GraphError as error:
            reply = error_reply(error)
        if logged:
            self._log(call, reply.status, call.mailbox.address, part=True)
        return reply

    def _next_throttle(self) -> GraphError | None:
        with self._lock:
            if not self._throttles:
                return None
            throttle = self._throttles.popleft()
        if throttle is None:
            return None
        return throttled_error(throttle.status, throttle.retry_after, throttle.code)

    def _log(self, call: Call, status: int, address: str | None, *, part: bool = False) -> None:
        prefer = call.headers.get("prefer", "")
        entry = LoggedRequest(
            call.method, call.path, dict(call.query), status, address, prefer, part
        )
        with self._lock:
            self.requests.append(entry)

    def _identity(
        self, method: str, endpoint: str, query: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        try:
            if endpoint == "authorize" and method == "GET":
                location = self.oauth.authorize(query, list(self.mailboxes))
                return 302, {"Location": location}, b""
            if endpoint == "token" and method == "POST":
                form = dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
                return _encode(Reply(200, self.oauth.token(form), {"Cache-Control": "no-store"}))
        except OAuthError as error:
            return _encode(Reply(error.status, error.body()))
        return _encode(Reply(404, {"error": "not_found", "error_description": "No such endpoint."}))
