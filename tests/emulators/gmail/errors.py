"""Google's error envelopes, exactly as the Gmail API sends them.

Every error is ``{"error": {"code", "message", "errors": [{"domain", "reason",
"message"}], "status"}}`` (handle-errors guide). The Python client retries a 403
only when ``errors[0].reason`` is ``userRateLimitExceeded`` or
``rateLimitExceeded``, so those reasons are spelled exactly. Quota rejections
also carry the ``google.rpc.ErrorInfo`` detail Google's APIs attach to quota
errors (``quota_limit_value``, observed), which is where a client can read the
limit it ran into.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

JsonBody = dict[str, Any]

UNAUTHENTICATED_MESSAGE = (
    "Request had invalid authentication credentials. Expected OAuth 2 access token, login "
    "cookie or other valid authentication credential. See "
    "https://developers.google.com/identity/sign-in/web/devconsole-project."
)
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


class ApiError(Exception):
    """An error answer: the HTTP status and Google's JSON envelope."""

    def __init__(self, status: int, body: JsonBody, headers: dict[str, str] | None = None) -> None:
        super().__init__(body["error"]["message"])
        self.status = status
        self.body = body
        self.headers = headers or {}


def envelope(
    code: int, message: str, reason: str, domain: str = "global", **extra: Any
) -> JsonBody:
    """Google's standard error envelope."""
    item: dict[str, Any] = {"message": message, "domain": domain, "reason": reason}
    item.update(extra)
    error: dict[str, Any] = {"code": code, "message": message, "errors": [item]}
    status = STATUS_NAMES.get(code)
    if status is not None:
        error["status"] = status
    return {"error": error}


def not_found() -> ApiError:
    """404: the entity (message, label, draft, history id) does not exist."""
    return ApiError(404, envelope(404, "Requested entity was not found.", "notFound"))


def invalid_argument(message: str) -> ApiError:
    """400: a parameter or body the API does not accept."""
    return ApiError(400, envelope(400, message, "invalidArgument"))


def failed_precondition(message: str) -> ApiError:
    """400 failedPrecondition (e.g. a message with no recipients)."""
    return ApiError(400, envelope(400, message, "failedPrecondition"))


def conflict(message: str) -> ApiError:
    """409: e.g. a label name that already exists."""
    return ApiError(409, envelope(409, message, "alreadyExists"))


def unauthenticated() -> ApiError:
    """401 for a missing, unknown or expired access token."""
    body = envelope(
        401,
        UNAUTHENTICATED_MESSAGE,
        "authError",
        location="Authorization",
        locationType="header",
    )
    body["error"]["errors"][0]["message"] = "Invalid Credentials"
    return ApiError(401, body, {"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/"'})


def delegation_denied(user_id: str) -> ApiError:
    """403 for a userId that is neither ``me`` nor the mailbox's address."""
    return ApiError(403, envelope(403, f"Delegation denied for {user_id}", "forbidden"))


def _quota_detail(limit: int) -> dict[str, Any]:
    return {
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "RATE_LIMIT_EXCEEDED",
        "domain": "googleapis.com",
        "metadata": {
            "service": "gmail.googleapis.com",
            "quota_metric": "gmail.googleapis.com/default",
            "quota_limit": "defaultPerMinutePerUser",
            "quota_limit_value": str(limit),
            "consumer": "projects/000000000000",
        },
    }


def user_rate_limited(limit: int) -> ApiError:
    """403 usageLimits/userRateLimitExceeded: the per-user units per minute are used up."""
    body = envelope(403, "User Rate Limit Exceeded", "userRateLimitExceeded", "usageLimits")
    body["error"]["details"] = [_quota_detail(limit)]
    return ApiError(403, body)


def rate_limited(limit: int, message: str = "Too many concurrent requests for user") -> ApiError:
    """429 global/rateLimitExceeded (also what an inner batch call gets)."""
    body = envelope(429, message, "rateLimitExceeded")
    body["error"]["details"] = [_quota_detail(limit)]
    return ApiError(429, body)


def sending_limited(until: datetime) -> ApiError:
    """429 for Gmail's sending limit: the message names when sending works again (observed)."""
    stamp = until.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return ApiError(
        429, envelope(429, f"User-rate limit exceeded.  Retry after {stamp}", "rateLimitExceeded")
    )


def backend_error() -> ApiError:
    """500 backendError: Google's transient server failure."""
    return ApiError(500, envelope(500, "Backend Error", "backendError"))


def fault(status: int) -> ApiError:
    """An injected failure with the body Google sends for that status."""
    if status == 429:
        return rate_limited(0, "Resource has been exhausted (e.g. check quota).")
    if status == 403:
        return user_rate_limited(0)
    if status == 401:
        return unauthenticated()
    if status == 503:
        return ApiError(503, envelope(503, "The service is currently unavailable.", "backendError"))
    return backend_error()
