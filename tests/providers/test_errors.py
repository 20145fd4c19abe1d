"""The one mapping from a provider failure to the account's status, reason and retry."""

from __future__ import annotations

import pytest

from mailroom.errors import ConfigError, ProviderError
from mailroom.providers.base import AuthError, InvalidCursorError, RateLimitError, TransientError
from mailroom.providers.errors import RATE_LIMIT_DELAY, AccountOutcome, account_outcome


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            AuthError("The server refused the login.", reason="wrong password"),
            AccountOutcome("auth_error", "wrong password", False, None, True, True),
        ),
        (
            ConfigError("No master key."),
            AccountOutcome(None, "No master key.", False, None, True, True),
        ),
        (
            RateLimitError("Slow down.", retry_after=12.0),
            AccountOutcome(None, "the provider asked to slow down", True, 12.0, False, True),
        ),
        (
            RateLimitError("Slow down."),
            AccountOutcome(
                None, "the provider asked to slow down", True, RATE_LIMIT_DELAY, False, True
            ),
        ),
        (
            InvalidCursorError("The sync cursor expired."),
            AccountOutcome(None, "The sync cursor expired.", True, 0.0, False, True),
        ),
        (
            TransientError("The server is unreachable.", reason="DNS: no such host"),
            AccountOutcome(None, "DNS: no such host", True, None, True, True),
        ),
        (
            ProviderError("The provider said no."),
            AccountOutcome(None, "The provider said no.", True, None, True, True),
        ),
        (
            KeyError("bug"),
            AccountOutcome(None, "'bug'", True, None, False, False),
        ),
    ],
)
def test_each_failure_maps_to_one_status_reason_and_retry(
    error: BaseException, expected: AccountOutcome
) -> None:
    """Auth, config, rate limit, invalid cursor, transient and a bug each map as documented."""
    assert account_outcome(error) == expected
