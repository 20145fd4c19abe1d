"""One API call through the emulator: auth, faults, quota, the method, the log.

The order is Google's as a client sees it: a missing or expired token is a
401 before anything else; then an injected fault (tests' scripted outages);
then the per-user quota — a call that would go past the limit is refused
*uncharged* (403 ``userRateLimitExceeded`` on its own, 429
``rateLimitExceeded`` inside a batch); then the method runs. Sending can also
meet Gmail's sending limit (429 "User-rate limit exceeded. Retry after
<time>"). Every call is logged with the units it was charged, so tests can
assert call patterns.
"""

from __future__ import annotations

import json
import threading
import traceback
from collections import deque
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.emulators.gmail.batch import InnerRequest, InnerResponse, parse_batch, render_batch
from tests.emulators.gmail.errors import (
    ApiError,
    backend_error,
    delegation_denied,
    fault,
    invalid_argument,
    rate_limited,
    sending_limited,
    unauthenticated,
    user_rate_limited,
)
from tests.emulators.gmail.mailbox import Mailbox
from tests.emulators.gmail.oauth import OAuthServer
from tests.emulators.gmail.quota import QuotaMeter
from tests.emulators.gmail.routes import Routes, message_format

API_PREFIX = "/gmail/v1/users/"
BATCH_PATHS = ("/batch/gmail/v1", "/batch")
JSON_TYPE = "application/json; charset=UTF-8"
SENDING_METHODS = ("messages.send", "drafts.send")


@dataclass(frozen=True)
class LoggedRequest:
    """One call the emulator answered."""

    verb: str
    path: str
    query: dict[str, list[str]]
    status: int
    units: int  # quota units charged (0 when refused)
    method: str | None  # the API method name (``messages.get``), None for batch/OAuth
    in_batch: bool
    at: float = 0.0  # when, on the quota meter's clock (seconds)


@dataclass
class Reply:
    """An HTTP answer."""

    status: int
    headers: dict[str, str]
    body: bytes


def json_reply(status: int, value: Any, headers: dict[str, str] | None = None) -> Reply:
    """A JSON answer (no body for 204)."""
    if status == 204 or value is None:
        return Reply(status, dict(headers or {}), b"")
    body = json.dumps(value).encode()
    return Reply(status, {"Content-Type": JSON_TYPE, **(headers or {})}, body)


def error_reply(error: ApiError) -> Reply:
    """Google's error envelope as an answer."""
    return json_reply(error.status, error.body, error.headers)


class GmailService:
    """The API of one mailbox: dispatches calls and batches (thread-safe)."""

    def __init__(self, mailbox: Mailbox, oauth: OAuthServer, quota: QuotaMeter) -> None:
        self.mailbox = mailbox
        self.oauth = oauth
        self.quota = quota
        self.routes = Routes(mailbox)
        self.rejection_status = 403  # what a call on its own gets past the limit (403 or 429)
        self.sending_blocked_until: datetime | None = None  # Gmail's sending limit
        self.log: list[LoggedRequest] = []
        self._faults: deque[tuple[int, bool | None]] = deque()
        self._lock = threading.Lock()

    # -- scripting --------------------------------------------------------

    def inject_faults(self, count: int, status: int = 500, in_batch: bool | None = None) -> None:
        """The next ``count`` calls (only batch parts, only direct calls, or any) fail."""
        with self._lock:
            self._faults.extend([(status, in_batch)] * count)

    def _take_fault(self, in_batch: bool) -> int | None:
        with self._lock:
            for index, (status, where) in enumerate(self._faults):
                if where is None or where == in_batch:
                    del self._faults[index]
                    return status
        return None

    def _log(self, entry: LoggedRequest) -> None:
        stamped = replace(entry, at=self.quota.now())
        with self._lock:
            self.log.append(stamped)

    # -- one call ---------------------------------------------------------

    def call(
        self,
        verb: str,
        target: str,
        headers: dict[str, str],
        body: bytes,
        *,
        in_batch: bool = False,
    ) -> Reply:
        """Answer one API call (``target`` is path and query)."""
        parts = urlsplit(target)
        query = parse_qs(parts.query, keep_blank_values=True)
        path = parts.path
        units = 0
        method: str | None = None
        try:
            if not self.oauth.valid(headers.get("authorization")):
                raise unauthenticated()
            if not path.startswith(API_PREFIX):
                raise ApiError(404, {"error": {"code": 404, "message": "Not Found"}})
            user_id, _, rest = path[len(API_PREFIX) :].partition("/")
            route, groups = self.routes.find(verb, "/" + rest)
            method = route.quota_method
            if user_id not in ("me", self.mailbox.address):
                raise delegation_denied(user_id)
            injected = self._take_fault(in_batch)
            if injected is not None:
                raise fault(injected)
            blocked = self.sending_blocked_until
            if method in SENDING_METHODS and blocked is not None and blocked > datetime.now(UTC):
                raise sending_limited(blocked)
            fmt = message_format(query) if method == "messages.get" else None
            cost = self.quota.profile.cost(method, fmt)
            if not self.quota.try_charge(cost):
                if in_batch or self.rejection_status == 429:
                    raise rate_limited(self.quota.limit)
                raise user_rate_limited(self.quota.limit)
            units = cost
            status, value = route.handler(*groups, query, _json_body(body))
            reply = json_reply(status, value)
        except ApiError as error:
            reply = error_reply(error)
        except Exception:  # an emulator bug: Google's 500, and the traceback for the tests
            traceback.print_exc()
            reply = error_reply(backend_error())
        self._log(LoggedRequest(verb, path, query, reply.status, units, method, in_batch))
        return reply

    # -- a batch ----------------------------------------------------------

    def batch(self, headers: dict[str, str], body: bytes) -> Reply:
        """Answer a multipart batch: every part a call of its own, answered in one body."""
        try:
            if not self.oauth.valid(headers.get("authorization")):
                raise unauthenticated()
            inner = parse_batch(body, headers.get("content-type", ""))
        except ApiError as error:
            reply = error_reply(error)
            self._log(LoggedRequest("POST", "/batch/gmail/v1", {}, reply.status, 0, None, False))
            return reply
        self._log(LoggedRequest("POST", "/batch/gmail/v1", {}, 200, 0, None, False))
        answers = [self._inner(request, headers) for request in inner]
        content_type, payload = render_batch(answers)
        return Reply(200, {"Content-Type": content_type}, payload)

    def _inner(self, request: InnerRequest, outer: dict[str, str]) -> InnerResponse:
        headers = dict(request.headers)
        headers.setdefault("authorization", outer.get("authorization", ""))
        reply = self.call(request.verb, request.target, headers, request.body, in_batch=True)
        return InnerResponse(request.content_id, reply.status, reply.headers, reply.body)


def _json_body(body: bytes) -> Any:
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except ValueError:
        raise invalid_argument("Invalid JSON payload received.") from None
