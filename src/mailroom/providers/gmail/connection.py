"""One Gmail account's connection: the API client, its tokens and its quota pacer.

:func:`open_account` builds a :class:`~mailroom.providers.gmail.api.GmailApi`
for an account from its row: tokens from :class:`mailroom.oauth.source.TokenSource`
(refreshed on 401, ``auth_error`` when Google refuses the refresh), every
connection through the SSRF guard with the operator's allow-list, and every
request charged to the account's shared quota pacer *before* it is sent
(``pacer.take`` waits until the units fit). A full or raw message is charged
:data:`~mailroom.providers.gmail.quota.UNITS_PER_FULL_MESSAGE` units, as the
pacer's policy says.

The API's base URL is Google's; ``Account.settings["gmail"]["api_url"]``
replaces it (the emulator in tests and demos).

A quota rejection is never an error (SPEC §1): :meth:`GmailAccount.deferral`
records it with the pacer and returns the :class:`RateLimitError` that defers
the work until the account's minute is over.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import select

from mailroom.config import Settings, load_settings
from mailroom.errors import ConfigError
from mailroom.oauth.source import TokenSource
from mailroom.providers.base import RateLimitError
from mailroom.providers.gmail.api import DEFAULT_BASE_URL, QUOTA_COSTS, GmailApi
from mailroom.providers.gmail.errors import QuotaExceededError
from mailroom.providers.gmail.quota import (
    SYSTEM_TIME,
    UNITS_PER_FULL_MESSAGE,
    QuotaPacer,
    TimeSource,
    pacer_for,
)
from mailroom.store.engine import Store
from mailroom.store.models import Account

__all__ = ["GmailAccount", "api_url_of", "open_account"]

COSTS = {**QUOTA_COSTS, "messages.get": UNITS_PER_FULL_MESSAGE}


def api_url_of(settings: object) -> str:
    """The Gmail API base URL an account's settings name (Google's by default)."""
    gmail = settings.get("gmail") if isinstance(settings, dict) else None
    url = gmail.get("api_url") if isinstance(gmail, dict) else None
    return str(url) if url else DEFAULT_BASE_URL


@dataclass
class _Meter:
    """Charges the pacer and remembers the last charge (what a rejection refused)."""

    pacer: QuotaPacer
    last: int = 0

    def __call__(self, units: int) -> None:
        self.last = units
        self.pacer.take(units)


@dataclass
class GmailAccount:
    """An open Gmail account: ids, the API client and the pacer (close it when done)."""

    account_id: int
    user_id: int
    address: str
    api: GmailApi
    pacer: QuotaPacer
    meter: _Meter = field(repr=False)

    def deferral(self, error: QuotaExceededError) -> RateLimitError:
        """Record Google's rejection with the pacer; the error that defers the work."""
        wait = self.pacer.rejected(self.meter.last, error.stated_limit)
        wait = max(wait, error.retry_after or 0.0)
        return RateLimitError(
            "Gmail asked to slow down; the work waits for the account's quota minute.",
            retry_after=wait,
        )

    def close(self) -> None:
        """Close the HTTP client and the pacer's connections (``contextlib.closing``)."""
        self.api.close()
        self.pacer.close()


def open_account(
    store: Store,
    settings: Settings | None,
    account_id: int,
    time: TimeSource = SYSTEM_TIME,
) -> GmailAccount:
    """Open the Gmail account ``account_id`` (ConfigError when it is not a Gmail account).

    ``time`` is the pacer's clock and sleep (the real ones but in benchmarks).
    """
    settings = settings or load_settings()
    with store.session() as session:
        row = session.execute(
            select(Account.user_id, Account.provider, Account.settings).where(
                Account.id == account_id
            )
        ).one_or_none()
    if row is None or row.provider != "gmail":
        raise ConfigError(f"There is no Gmail account with id {account_id}.")
    account_settings = row.settings or {}
    pacer = pacer_for(store, settings, account_id, clock=time.clock, sleep=time.sleep)
    meter = _Meter(pacer)
    api = GmailApi(
        TokenSource(store, account_id, settings),
        base_url=api_url_of(account_settings),
        allowed_hosts=settings.allowed_private_host_list,
        charge=meter,
        costs=COSTS,
    )
    address = str(account_settings.get("address", ""))
    return GmailAccount(account_id, int(row.user_id), address, api, pacer, meter)
