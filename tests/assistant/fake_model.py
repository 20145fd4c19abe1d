"""A fake OpenAI-compatible chat/completions server on loopback, with controllable latency.

The answer and the delay are chosen by the mail's subject: the first word of
the subject that names a rule in ``rules`` decides (seconds to wait, the JSON
content to answer). A delay of ``None`` means "never": the request waits until
the server is closed. Every request body is kept in ``requests``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class FakeModel:
    """The server's rules and what it was asked."""

    rules: dict[str, tuple[float | None, str]]
    requests: list[dict[str, Any]] = field(default_factory=list)
    closing: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    def answer_for(self, body: dict[str, Any]) -> tuple[float | None, str]:
        """The (delay, content) of the first rule whose word the user message contains."""
        text = body["messages"][-1]["content"]
        for word, rule in self.rules.items():
            if word in text:
                return rule
        return 0.0, "I cannot tell."


@contextmanager
def fake_model(rules: dict[str, tuple[float | None, str]]) -> Iterator[FakeModel]:
    """Serve a :class:`FakeModel` on 127.0.0.1 for the block; its ``url`` is the /v1 base."""
    model = FakeModel(rules)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            model.requests.append(body)
            delay, content = model.answer_for(body)
            if model.closing.wait(30.0 if delay is None else delay):
                return  # shutting down: no answer
            reply = json.dumps(
                {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
            ).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)
            except OSError:
                pass  # the client gave up (its timeout)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    model.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield model
    finally:
        model.closing.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def verdict(tab: str, reason: str = "fake") -> str:
    """A well-formed answer naming ``tab``."""
    return json.dumps({"tab": tab, "confidence": 0.9, "reason": reason})
