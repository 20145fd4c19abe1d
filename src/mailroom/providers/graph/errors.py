"""Graph's error answers as mailroom's provider errors, each one plain sentence.

Graph errors are ``{"error": {"code", "message", "innerError"}}``. The mapping:

====================================  ==========================================
401                                   AuthError (after one token refresh failed)
403 ErrorAccessDenied (and kin)       AuthError (mail permission not granted)
404                                   :class:`NotFoundError` (message/folder gone)
409                                   :class:`FolderExistsError`
410, or code syncStateNotFound /      InvalidCursorError (read the folder again)
resyncRequired (any case)
429                                   RateLimitError with ``retry_after``
500, 502, 503, 504                    TransientError (RateLimitError when the
                                      answer says when to come back)
other 4xx                             ProviderError
====================================  ==========================================

The detail (status and Graph code) goes into ``reason`` and the log, never into
the sentence the account owner reads.
"""

from __future__ import annotations

import email.utils
import time
from typing import Any

import httpx

from mailroom.providers.base import (
    AuthError,
    InvalidCursorError,
    ProviderError,
    RateLimitError,
    TransientError,
)

__all__ = [
    "CURSOR_CODES",
    "FolderExistsError",
    "NotFoundError",
    "error_code",
    "error_for",
    "retry_after",
]

CURSOR_CODES = frozenset({"syncstatenotfound", "resyncrequired", "syncstateinvalid"})
RETRYABLE = frozenset({429, 500, 502, 503, 504})
ACCESS_DENIED_CODES = frozenset(
    {"erroraccessdenied", "accessdenied", "authorization_requestdenied", "forbidden"}
)


class NotFoundError(ProviderError):
    """The message or folder asked for is not (or no longer) in the mailbox."""


class FolderExistsError(ProviderError):
    """A folder of that name already exists where one was to be created or renamed."""


def error_code(body: Any) -> str:
    """The Graph error code of a response body ('' if it has none)."""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and isinstance(error.get("code"), str):
            return str(error["code"])
    return ""


def _body(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def retry_after(headers: httpx.Headers | dict[str, str]) -> float | None:
    """The ``Retry-After`` wait in seconds: a number (fractional ok) or an HTTP date."""
    value = headers.get("Retry-After") or headers.get("retry-after")
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            moment = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = moment.timestamp() - time.time()
    return max(0.0, seconds)


def error_for(status: int, body: Any, headers: httpx.Headers | dict[str, str]) -> ProviderError:
    """The provider error for a Graph error answer (also a $batch part's)."""
    code = error_code(body)
    detail = f"{status} {code}".strip()
    if status == 410 or code.lower() in CURSOR_CODES:
        return InvalidCursorError(
            "Microsoft no longer knows where mailroom's last sync of a folder stopped; "
            "the folder will be read again."
        )
    if status == 401:
        return AuthError(
            "Microsoft no longer accepts this account's sign-in; sign in again.",
            reason=f"sign-in refused ({detail})",
        )
    if status == 403 and code.lower() in ACCESS_DENIED_CODES:
        return AuthError(
            "Microsoft refused mailroom access to this mailbox; sign in again and allow mail "
            "access.",
            reason=f"access refused ({detail})",
        )
    if status == 404:
        return NotFoundError("The message or folder is no longer in the Microsoft mailbox.")
    if status == 409:
        return FolderExistsError("A folder with that name already exists in the Microsoft mailbox.")
    wait = retry_after(headers)
    if status == 429 or (status in RETRYABLE and wait is not None):
        return RateLimitError(
            "Microsoft asked mailroom to slow down; it will try again shortly.", retry_after=wait
        )
    if status >= 500:
        return TransientError(
            "Microsoft's mail service is not answering properly right now; mailroom will try "
            "again later.",
            reason=f"server error ({detail})",
        )
    return ProviderError(f"Microsoft refused a request mailroom made ({detail}).")


def response_error(response: httpx.Response) -> ProviderError:
    """The provider error for an HTTP error response."""
    return error_for(response.status_code, _body(response), response.headers)
