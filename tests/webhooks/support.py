"""What the webhook tests share: a real receiver over HTTP on loopback, a driven clock, setup."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from mailroom.config import Settings
from mailroom.secrets import generate_key
from mailroom.store.engine import Store
from mailroom.store.models import Account, utcnow
from mailroom.webhooks.endpoints import add_endpoint
from mailroom.webhooks.events import EVENT_TYPES
from mailroom.webhooks.worker import WebhookWorker
from tests.factories import make_message
from tests.helpers import ingest, make_account


@dataclass(frozen=True)
class Received:
    """One request the receiver got, and what it answered."""

    headers: dict[str, str]
    body: bytes
    answered: int


class Receiver:
    """A threaded HTTP server on 127.0.0.1 that records POSTs and answers as told.

    ``answers`` is a list of status codes used one per request (then ``default``);
    ``down()`` stops listening, ``up()`` listens again on the same port.
    """

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.answers: list[int] = []
        self.default = 200
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.up()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the http.server name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver._lock:
                    code = receiver.answers.pop(0) if receiver.answers else receiver.default
                    receiver.requests.append(Received(dict(self.headers.items()), body, code))
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        return Handler

    def up(self) -> None:
        """Listen (again, on the same port once one was chosen)."""
        server = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()

    def down(self) -> None:
        """Stop listening: connections are refused until ``up()``."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        """Where the receiver listens."""
        return f"http://127.0.0.1:{self.port}/hook"

    def accepted_ids(self) -> list[str]:
        """The event ids of the requests answered 2xx, in arrival order."""
        with self._lock:
            return [
                r.headers["Mailroom-Webhook-Id"] for r in self.requests if 200 <= r.answered < 300
            ]


class Clock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or utcnow()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        """Move the clock on."""
        self.now += delta


def hook_settings(tmp_path: Path, allowed: str = "127.0.0.1") -> Settings:
    """Settings with a master key and loopback allow-listed (as the IMAP tests allow Dovecot)."""
    return Settings(data_dir=tmp_path, master_key=generate_key(), allowed_private_hosts=allowed)


def live_account(store: Store, owner: str = "me") -> tuple[int, int, int]:
    """An account whose import has finished (so new mail is messageNew)."""
    account = make_account(store, owner=owner)
    with store.session() as session:
        row = session.get(Account, account[1])
        assert row is not None
        row.import_finished_at = utcnow() - timedelta(minutes=1)
    return account


def endpoint_for(
    store: Store, settings: Settings, url: str, user_id: int, events: list[str] | None = None
) -> tuple[int, str]:
    """Add an endpoint; its id and secret."""
    with store.session() as session:
        return add_endpoint(session, settings, user_id, url, events or list(EVENT_TYPES))


def new_mail(store: Store, account: tuple[int, int, int], count: int, prefix: str = "m") -> None:
    """Store ``count`` new messages in one batch."""
    raws = [(f"{prefix}{n}", make_message(f"{prefix}{n}@hook.test")) for n in range(count)]
    ingest(store, account, raws)


def drive(worker: WebhookWorker, clock: Clock, rounds: int, step: timedelta) -> None:
    """Run ``rounds`` rounds, moving the clock by ``step`` after each."""
    for _ in range(rounds):
        worker.run_once()
        clock.advance(step)


@dataclass(frozen=True)
class Hooked:
    """A live account of ``me`` with an endpoint at the receiver (all event types)."""

    settings: Settings
    account: tuple[int, int, int]
    endpoint_id: int
    secret: str


def hooked(store: Store, tmp_path: Path, receiver_url: str, mail: int = 0) -> Hooked:
    """Settings, a live account, an endpoint at ``receiver_url``; then ``mail`` new messages."""
    settings = hook_settings(tmp_path)
    account = live_account(store)
    endpoint_id, secret = endpoint_for(store, settings, receiver_url, account[0])
    if mail:
        new_mail(store, account, mail)
    return Hooked(settings, account, endpoint_id, secret)
