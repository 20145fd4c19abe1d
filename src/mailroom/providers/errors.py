"""The one mapping from a provider failure to what happens to the account.

Every caller that runs provider work — the sync and import tasks, the watch
supervisor, ``mailroom sync`` — asks :func:`account_outcome` what a failure
means, and only decides *how* to wait (re-enqueue a job, back off a watcher,
sleep in the foreground)::

    failure                   status        retry       retry_after
    AuthError                 auth_error    no          -            the owner must act
    ConfigError               (unchanged)   no          -            the operator must act
    RateLimitError            (unchanged)   yes         its value or RATE_LIMIT_DELAY
    InvalidCursorError        (unchanged)   yes         0            the provider resets, resyncs
    TransientError, other     (unchanged)   yes         None         the caller's own backoff
    ProviderError
    anything else (a bug)     (unchanged)   yes         None         logged with its traceback

``reason`` is the operator's reason (``Account.status_reason``): the error's
``reason`` when it has one (the owner-facing sentence may hide detail on purpose
— the SSRF guard says the same for a blocked and an unresolvable host), else its
text. ``recorded`` says whether the failure belongs on the account at all (a
rate limit or an invalid cursor is the provider's normal flow, not a fault).
"""

from __future__ import annotations

from typing import NamedTuple

from mailroom.errors import ConfigError, ProviderError
from mailroom.providers.base import AuthError, InvalidCursorError, RateLimitError, TransientError

__all__ = ["RATE_LIMIT_DELAY", "AccountOutcome", "account_outcome", "failure_reason"]

RATE_LIMIT_DELAY = 60.0  # seconds, when the provider asked to slow down without saying how long


class AccountOutcome(NamedTuple):
    """What a failure means for the account (see the module docstring)."""

    status: str | None  # the account's new status; None leaves it as it is
    reason: str
    retry: bool
    retry_after: float | None
    recorded: bool  # whether the reason is written on the account
    expected: bool  # a known provider failure (False: a bug, log its traceback)


def failure_reason(error: BaseException) -> str:
    """Why an account does not sync, for the operator (``Account.status_reason``)."""
    reason = getattr(error, "reason", None)
    return reason if isinstance(reason, str) and reason else str(error)


def account_outcome(error: BaseException) -> AccountOutcome:
    """Map a provider failure to the account's status, reason and retry."""
    reason = failure_reason(error)
    if isinstance(error, AuthError):
        return AccountOutcome("auth_error", reason, False, None, True, True)
    if isinstance(error, ConfigError):
        return AccountOutcome(None, reason, False, None, True, True)
    if isinstance(error, RateLimitError):
        return AccountOutcome(
            None, reason, True, error.retry_after or RATE_LIMIT_DELAY, False, True
        )
    if isinstance(error, InvalidCursorError):
        return AccountOutcome(None, reason, True, 0.0, False, True)
    if isinstance(error, TransientError | ProviderError):
        return AccountOutcome(None, reason, True, None, True, True)
    return AccountOutcome(None, reason, True, None, False, False)
