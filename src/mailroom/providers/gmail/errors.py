"""Gmail's error answers as mailroom's provider errors, each one plain sentence.

::

    401 (after one refresh)                 AuthError           connect the account again
    403/429 userRateLimitExceeded,
            rateLimitExceeded               QuotaExceededError  a RateLimitError: slow down
    403 anything else                       AuthError           the account must allow it
    404                                     GmailNotFoundError  (history: InvalidCursorError,
                                                                 raised by the client)
    400, 409 and other 4xx                  GmailRequestError   our request was refused
    5xx, network                            TransientError      retry later

A quota rejection carries ``retry_after`` (the ``Retry-After`` header, or the
"Retry after <RFC 3339 time>" Google writes into sending-limit messages) and
``stated_limit``: the units per minute Google names in the error's
``google.rpc.ErrorInfo`` detail (``quota_limit_value``), for the quota pacer.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

from mailroom.errors import ProviderError
from mailroom.providers.base import AuthError, RateLimitError, TransientError

__all__ = [
    "RATE_LIMIT_REASONS",
    "GmailNotFoundError",
    "GmailRequestError",
    "QuotaExceededError",
    "error_for",
    "retry_after_of",
]

RATE_LIMIT_REASONS = frozenset({"userRateLimitExceeded", "rateLimitExceeded"})
_RETRY_AFTER_TEXT = re.compile(r"Retry after (\S+)", re.IGNORECASE)


class QuotaExceededError(RateLimitError):
    """Gmail refused a request over the user's (or project's) quota."""

    def __init__(
        self, message: str, retry_after: float | None = None, stated_limit: int | None = None
    ) -> None:
        super().__init__(message, retry_after)
        self.stated_limit = stated_limit


class GmailNotFoundError(ProviderError):
    """The message, label, thread or draft does not exist (any more)."""


class GmailRequestError(ProviderError):
    """Gmail refused the request itself (400, 409): a bug or a conflict, not the account."""


def _error_fields(body: Any) -> tuple[str, str, int | None]:
    """(message, first reason, stated quota limit) from Google's envelope."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return "", "", None
    message = str(error.get("message") or "")
    errors = error.get("errors")
    reason = ""
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        reason = str(errors[0].get("reason") or "")
    limit: int | None = None
    for detail in error.get("details") or []:
        metadata = detail.get("metadata") if isinstance(detail, dict) else None
        value = metadata.get("quota_limit_value") if isinstance(metadata, dict) else None
        if isinstance(value, str) and value.isdigit() and int(value) > 0:
            limit = int(value)
    return message, reason, limit


def retry_after_of(headers: httpx.Headers | dict[str, str], message: str = "") -> float | None:
    """Seconds to wait, from ``Retry-After`` (seconds or a date) or "Retry after <time>"."""
    value = headers.get("retry-after") or headers.get("Retry-After")
    when: datetime | None = None
    if value:
        try:
            return max(0.0, float(value))
        except ValueError:
            try:
                when = parsedate_to_datetime(value)
            except (TypeError, ValueError):
                when = None
    if when is None:
        match = _RETRY_AFTER_TEXT.search(message)
        if match is not None:
            try:
                when = datetime.fromisoformat(match.group(1).rstrip(".").replace("Z", "+00:00"))
            except ValueError:
                when = None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def error_for(
    status: int, body: Any, headers: httpx.Headers | dict[str, str], what: str
) -> ProviderError:
    """The provider error for an answer with ``status`` to the request to ``what``."""
    message, reason, limit = _error_fields(body)
    detail = f" ({message})" if message else ""
    if status in (403, 429) and (status == 429 or reason in RATE_LIMIT_REASONS):
        return QuotaExceededError(
            f"Gmail asked mailroom to slow down while trying to {what}; it will try again.",
            retry_after_of(headers, message),
            limit,
        )
    if status == 401:
        return AuthError(
            "Google no longer accepts this account's sign-in; connect the account again.",
            reason="Gmail refused the access token (401)",
        )
    if status == 403:
        return AuthError(
            f"Gmail does not allow mailroom to {what}{detail}; connect the account again "
            "and grant the access it asks for.",
            reason=f"Gmail refused access (403 {reason or 'forbidden'})",
        )
    if status == 404:
        return GmailNotFoundError(f"Gmail could not find what mailroom asked for to {what}.")
    if 400 <= status < 500:
        return GmailRequestError(f"Gmail did not accept the request to {what}{detail}.")
    return TransientError(
        f"Gmail had a server error ({status}) while trying to {what}; it will try again.",
        reason=f"Gmail server error {status}",
    )
