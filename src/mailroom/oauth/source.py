"""``TokenSource``: a valid access token for one account, refreshed when needed.

A provider client asks :meth:`TokenSource.access_token` before a request and
:meth:`TokenSource.rejected` when the provider answered 401 for a token (or
calls the source: ``source()`` and ``source(stale)`` are the same two). The
source refreshes when the stored token is expired (or within ``margin`` seconds
of it), or when told the token it handed out was rejected, and persists what
the refresh answered — a rotated refresh token (Microsoft) replaces the old one
in the same transaction, sealed (:mod:`.credentials`). Tokens are never logged.

Refreshing reads the account row ``FOR UPDATE`` (PostgreSQL; SQLite has one
writer anyway) and looks again: when another worker refreshed meanwhile, its
token is used, so two workers never spend the same rotating refresh token.

Failures, per :func:`mailroom.providers.errors.account_outcome`: a refused
refresh (``invalid_grant``, ``invalid_client``) is an AuthError and turns the
account to ``auth_error`` with the reason; a network failure is a
TransientError and leaves the status alone. A disconnected account is never
refreshed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace

from sqlalchemy import select, update

from mailroom.config import Settings, load_settings
from mailroom.errors import ConfigError, ProviderError
from mailroom.oauth.credentials import OAuthCredentials, load_credentials, save_tokens
from mailroom.oauth.tokens import TokenEndpoint, TokenSet
from mailroom.oauth.transport import DEFAULT_TIMEOUT
from mailroom.providers.base import AuthError, TransientError
from mailroom.providers.errors import account_outcome
from mailroom.secrets import SecretBox
from mailroom.store.engine import Store
from mailroom.store.models import Account

__all__ = ["DEFAULT_MARGIN", "TokenSource"]

DEFAULT_MARGIN = 60.0  # seconds before expiry when a token counts as expired


class TokenSource:
    """Hands out a valid access token of one account (safe to share between threads)."""

    def __init__(
        self,
        store: Store,
        account_id: int,
        settings: Settings | None = None,
        *,
        margin: float = DEFAULT_MARGIN,
        timeout: float = DEFAULT_TIMEOUT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.account_id = account_id
        self._settings = settings or load_settings()
        self._box = SecretBox.from_settings(self._settings)
        self._margin = margin
        self._timeout = timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._current: str | None = None
        self._expires_at: float | None = None

    def __call__(self, stale: str | None = None) -> str:
        """As a plain callable: :meth:`access_token`, or :meth:`rejected` for ``stale``."""
        return self.access_token() if stale is None else self.rejected(stale)

    def access_token(self) -> str:
        """A token that is not expired, refreshing (and storing) new tokens when needed."""
        with self._lock:
            if self._current is not None and not self._expiring(self._expires_at):
                return self._current
            return self._refresh(rejected=None)

    def rejected(self, token: str) -> str:
        """The provider refused ``token`` (HTTP 401): a fresh one, unless one came meanwhile."""
        with self._lock:
            if self._current is not None and self._current != token:
                return self._current
            return self._refresh(rejected=token)

    def _expiring(self, expires_at: float | None) -> bool:
        return expires_at is not None and self._clock() + self._margin >= expires_at

    def _refresh(self, rejected: str | None) -> str:
        try:
            tokens = self._refresh_stored(rejected)
        except (AuthError, TransientError) as exc:
            # After the row lock is gone: the refresh's transaction was rolled back.
            outcome = account_outcome(exc)
            self._record(outcome.status, outcome.reason)
            raise
        self._current, self._expires_at = tokens.access_token, tokens.expires_at
        return tokens.access_token

    def _refresh_stored(self, rejected: str | None) -> TokenSet:
        """Under the row lock: the stored tokens if still good, else refreshed and saved."""
        with self.store.session() as session:
            account = session.scalar(
                select(Account).where(Account.id == self.account_id).with_for_update()
            )
            if account is None:
                raise ConfigError(f"There is no account with id {self.account_id}.")
            if account.status == "disconnected":
                raise ProviderError(
                    f"The account {account.name!r} is disconnected; add it again to sync it."
                )
            credentials = load_credentials(account, self._box)
            stored = credentials.tokens
            if stored.access_token != rejected and not self._expiring(stored.expires_at):
                return stored  # still good, or another worker refreshed meanwhile
            fresh = self._endpoint(credentials).refresh(stored)
            save_tokens(account, self._box, replace(credentials, tokens=fresh))
            if account.status == "auth_error":
                account.status, account.status_reason = "active", None
            return fresh

    def _endpoint(self, credentials: OAuthCredentials) -> TokenEndpoint:
        return TokenEndpoint(
            credentials.token_url,
            credentials.client,
            allowed_hosts=self._settings.allowed_private_host_list,
            timeout=self._timeout,
            clock=self._clock,
        )

    def _record(self, status: str | None, reason: str) -> None:
        values: dict[str, str] = {"status_reason": reason[:500]}
        if status is not None:
            values["status"] = status
        with self.store.session() as session:
            session.execute(update(Account).where(Account.id == self.account_id).values(**values))
