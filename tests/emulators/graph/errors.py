"""Graph's error responses: one exception the routes raise, rendered as Graph renders it.

Every Graph error body is ``{"error": {"code", "message", "innerError": {"date",
"request-id", "client-request-id"}}}``; throttling adds ``Retry-After`` and an
``innerError`` with the status, expired sync state a ``Location`` header. A route
raises :class:`GraphError` and the server (or ``$batch``) turns it into a response.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any


class GraphError(Exception):
    """An error response: HTTP status, Graph error code, message and extra headers."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        headers: dict[str, str] | None = None,
        inner: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})
        self.inner = dict(inner or {})

    def body(self) -> dict[str, Any]:
        """The JSON body Graph sends for this error."""
        inner = {
            "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S"),
            "request-id": str(uuid.uuid4()),
            "client-request-id": str(uuid.uuid4()),
        }
        inner.update(self.inner)
        return {"error": {"code": self.code, "message": self.message, "innerError": inner}}


def not_found(what: str = "The specified object was not found in the store.") -> GraphError:
    """404 ErrorItemNotFound, what Graph answers for an unknown message or folder id."""
    return GraphError(404, "ErrorItemNotFound", what)


def bad_request(message: str, code: str = "BadRequest") -> GraphError:
    """400 with the given code (``BadRequest``, ``ErrorInvalidRequest``, ...)."""
    return GraphError(400, code, message)


def throttled(status: int, retry_after: str, code: str | None = None) -> GraphError:
    """429 (or 503) with a ``Retry-After`` header in seconds, possibly fractional."""
    if status == 429:
        return GraphError(
            429,
            code or "TooManyRequests",
            "Please retry again later.",
            headers={"Retry-After": retry_after},
            inner={"code": "429", "message": "Please retry after", "status": "429"},
        )
    return GraphError(
        status,
        code or "ServiceUnavailable",
        "The service is temporarily unavailable; please retry after the given time.",
        headers={"Retry-After": retry_after},
    )


def mailbox_concurrency(retry_after: str) -> GraphError:
    """429 ApplicationThrottled for a fifth request in flight on one mailbox (obs)."""
    return GraphError(
        429,
        "ApplicationThrottled",
        "Application is over its MailboxConcurrency limit.",
        headers={"Retry-After": retry_after},
        inner={"code": "429", "message": "MailboxConcurrency", "status": "429"},
    )


def expired_access_token() -> GraphError:
    """401 InvalidAuthenticationToken for an expired or unknown bearer token."""
    return GraphError(
        401,
        "InvalidAuthenticationToken",
        "Access token has expired or is not yet valid.",
        headers={"WWW-Authenticate": 'Bearer realm="", error="invalid_token"'},
    )
