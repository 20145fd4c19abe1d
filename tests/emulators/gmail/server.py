"""The emulator's HTTP server: stdlib ``ThreadingHTTPServer`` on 127.0.0.1 in a thread.

Paths served (Google's, so a client only changes its base URL):

* ``/gmail/v1/users/{userId}/...`` — the API (:mod:`.routes`)
* ``/batch/gmail/v1`` and ``/batch`` — multipart batches (:mod:`.batch`)
* ``/token`` and ``/o/oauth2/v2/auth`` — OAuth (:mod:`.oauth`)

HTTP/1.1 with keep-alive; every answer carries a Content-Length.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from tests.emulators.gmail.oauth import OAuthError, OAuthServer
from tests.emulators.gmail.service import BATCH_PATHS, JSON_TYPE, GmailService, Reply

TOKEN_PATH = "/token"
AUTHORIZE_PATH = "/o/oauth2/v2/auth"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle's algorithm the body waits for
    # the client's delayed ACK of the headers, 40 ms on every keep-alive answer.
    disable_nagle_algorithm = True
    server: EmulatorHTTPServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib's name
        """Quiet: tests read the emulator's request log instead."""

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, reply: Reply) -> None:
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        if reply.body:
            self.wfile.write(reply.body)

    def _headers(self) -> dict[str, str]:
        return {name.lower(): value for name, value in self.headers.items()}

    def _handle(self) -> None:
        body = self._body()
        latency = self.server.latency
        if latency > 0:
            time.sleep(latency)
        path = urlsplit(self.path).path
        if path == TOKEN_PATH and self.command == "POST":
            reply = _token(self.server.oauth, body)
        elif path == AUTHORIZE_PATH and self.command == "GET":
            reply = _authorize(self.server.oauth, self.path)
        elif path in BATCH_PATHS and self.command == "POST":
            reply = self.server.service.batch(self._headers(), body)
        else:
            reply = self.server.service.call(self.command, self.path, self._headers(), body)
        self._send(reply)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle


def _token(oauth: OAuthServer, body: bytes) -> Reply:
    form = dict(parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True))
    try:
        answer = oauth.token(form)
        status = 200
    except OAuthError as error:
        answer, status = error.body, error.status
    return Reply(status, {"Content-Type": JSON_TYPE}, json.dumps(answer).encode())


def _authorize(oauth: OAuthServer, target: str) -> Reply:
    params = dict(parse_qsl(urlsplit(target).query, keep_blank_values=True))
    try:
        location = oauth.authorize(params)
    except OAuthError as error:
        return Reply(error.status, {"Content-Type": "text/plain"}, str(error).encode())
    return Reply(302, {"Location": location}, b"")


class EmulatorHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server that knows the service it fronts."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, port: int, service: GmailService, oauth: OAuthServer) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.service = service
        self.oauth = oauth
        self.latency = 0.0


def serve_in_thread(server: EmulatorHTTPServer) -> threading.Thread:
    """Run ``server`` on a daemon thread; ``server.shutdown()`` stops it."""
    thread = threading.Thread(
        target=server.serve_forever, args=(0.05,), name="gmail-emulator", daemon=True
    )
    thread.start()
    return thread
