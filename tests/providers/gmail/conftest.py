"""Fixtures of the Gmail provider tests: the emulator, a token source, a client on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mailroom.oauth.tokens import OAuthClient, TokenEndpoint, TokenSet
from mailroom.providers.gmail.api import GmailApi
from tests.emulators.gmail.emulator import GmailEmulator
from tests.emulators.gmail.fixtures import gmail_emulator

__all__ = ["EmulatorTokens", "gmail_api", "gmail_emulator", "gmail_tokens"]

LOOPBACK = ("127.0.0.1",)


class EmulatorTokens:
    """A TokenSource refreshing at the emulator's ``/token`` with mailroom's TokenEndpoint."""

    def __init__(self, gmail: GmailEmulator) -> None:
        access, refresh = gmail.tokens()
        self.tokens = TokenSet(access, refresh)
        self.endpoint = TokenEndpoint(
            f"{gmail.url}/token",
            OAuthClient(gmail.oauth.client_id, gmail.oauth.client_secret),
            allowed_hosts=LOOPBACK,
        )
        self.refreshes = 0

    def access_token(self) -> str:
        """The current access token."""
        return self.tokens.access_token

    def rejected(self, token: str) -> str:
        """Refresh over HTTP (AuthError when the emulator refuses the refresh token)."""
        self.tokens = self.endpoint.refresh(self.tokens)
        self.refreshes += 1
        return self.tokens.access_token


@pytest.fixture
def gmail_tokens(gmail_emulator: GmailEmulator) -> EmulatorTokens:
    """A token source for the emulated mailbox."""
    return EmulatorTokens(gmail_emulator)


@pytest.fixture
def gmail_api(gmail_emulator: GmailEmulator, gmail_tokens: EmulatorTokens) -> Iterator[GmailApi]:
    """mailroom's Gmail client on the emulator (127.0.0.1 allow-listed for the SSRF guard)."""
    with GmailApi(gmail_tokens, base_url=gmail_emulator.url, allowed_hosts=LOOPBACK) as api:
        yield api
