"""The one-shot loopback listener that receives the browser's redirect (RFC 8252 §7.3).

:class:`LoopbackReceiver` binds ``127.0.0.1`` on a port the system picks (so the
redirect URI is ``http://127.0.0.1:<port>/callback``, a loopback IP literal rather
than ``localhost``, as RFC 8252 §8.3 recommends) *before* the authorization URL
is built, and :meth:`~LoopbackReceiver.wait` serves requests one at a time until
the authorization answer arrives or the time is up:

* another path (``/favicon.ico``) → 404, keep waiting;
* the callback without ``state``, ``code`` or ``error`` → 400, keep waiting;
* a ``state`` the check refuses → a plain page, and the :class:`StateError`;
* ``error=...`` → a plain page, and an AuthError (``access_denied``: the owner
  said no) or TransientError (``temporarily_unavailable``, ``server_error``);
* ``code=...`` with a good state → a plain page saying to go back to the
  terminal, and the code.

The page never echoes what the request carried. Nothing is listening once
``wait`` returns or the receiver is closed.
"""

from __future__ import annotations

import html
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import TracebackType
from urllib.parse import parse_qs, urlsplit

from mailroom.errors import MailroomError
from mailroom.providers.base import AuthError, TransientError

__all__ = ["CALLBACK_PATH", "DEFAULT_WAIT", "LoopbackReceiver"]

CALLBACK_PATH = "/callback"
DEFAULT_WAIT = 300.0  # seconds the owner has to finish in the browser
_REQUEST_TIMEOUT = 5.0  # a connection that sends nothing is dropped after this

_TRANSIENT = ("temporarily_unavailable", "server_error")


@dataclass
class _Outcome:
    code: str | None = None
    error: MailroomError | None = None


def _page(title: str, text: str) -> bytes:
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>mailroom</title></head>"
        f"<body><h1>{html.escape(title)}</h1><p>{html.escape(text)}</p></body></html>"
    ).encode()


def _refusal(error: str, description: str) -> MailroomError:
    if error == "access_denied":
        return AuthError(
            "Access was refused in the browser, so the account was not connected.",
            reason="access_denied",
        )
    detail = f" ({description})" if description else ""
    if error in _TRANSIENT:
        return TransientError(
            f"The sign-in page could not finish ({error}){detail}; try again later.",
            reason=error,
        )
    return AuthError(
        f"The sign-in page refused the request: {error}{detail}; check the client id and "
        "its registration.",
        reason=error,
    )


class _CallbackServer(HTTPServer):
    """The listening socket, the state check in force and what the answer said."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _CallbackHandler)
        self.check_state: Callable[[str], None] = _refuse_all
        self.outcome = _Outcome()

    def handle_error(self, request: object, client_address: object) -> None:
        """A browser connection that broke is no reason to print a traceback."""


class _CallbackHandler(BaseHTTPRequestHandler):
    timeout = _REQUEST_TIMEOUT
    server: _CallbackServer

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        parts = urlsplit(self.path)
        if parts.path != CALLBACK_PATH:
            self._answer(404, "Not found", "This address only receives sign-in answers.")
            return
        query = {key: values[0] for key, values in parse_qs(parts.query).items()}
        state, code, error = query.get("state"), query.get("code"), query.get("error")
        if state is None or (code is None and error is None):
            self._answer(400, "Not a sign-in answer", "Nothing to do here.")
            return
        outcome = self.server.outcome
        try:
            self.server.check_state(state)
        except MailroomError as exc:
            outcome.error = exc
            self._answer(400, "Refused", "This sign-in answer was not expected; start again.")
            return
        if error is not None:
            outcome.error = _refusal(error, query.get("error_description", "")[:200])
            self._answer(200, "Not connected", "Return to the terminal to see why.")
            return
        outcome.code = code
        self._answer(200, "Signed in", "You can close this window and return to mailroom.")

    def _answer(self, status: int, title: str, text: str) -> None:
        body = _page(title, text)
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        """Quiet: the request line carries the authorization code."""


class LoopbackReceiver:
    """Listens on 127.0.0.1:<free port> for one authorization answer."""

    def __init__(self) -> None:
        self._server = _CallbackServer()
        self.port = int(self._server.server_address[1])

    @property
    def redirect_uri(self) -> str:
        """The redirect URI to send in the authorization request."""
        return f"http://127.0.0.1:{self.port}{CALLBACK_PATH}"

    def wait(self, check_state: Callable[[str], None], timeout: float = DEFAULT_WAIT) -> str:
        """Serve requests until the answer comes; the code, or the answer's error raised.

        ``check_state`` raises (a StateError) for a state this flow did not issue.
        A TransientError when nothing came within ``timeout`` seconds.
        """
        self._server.check_state = check_state
        outcome = self._server.outcome
        deadline = time.monotonic() + timeout
        try:
            while outcome.code is None and outcome.error is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TransientError(
                        f"No answer came from the browser within {timeout:.0f} seconds; start "
                        "the connection again and finish signing in sooner.",
                        reason="timed out waiting for the browser",
                    )
                self._server.timeout = min(left, 0.5)
                self._server.handle_request()
        finally:
            self.close()
        if outcome.error is not None:
            raise outcome.error
        assert outcome.code is not None
        return outcome.code

    def close(self) -> None:
        """Stop listening (idempotent)."""
        self._server.server_close()

    def __enter__(self) -> LoopbackReceiver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _refuse_all(state: str) -> None:
    raise AuthError("No sign-in is being waited for.")
