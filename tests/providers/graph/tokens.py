"""A TokenSource for tests: the emulator's tokens, refreshed at its token endpoint."""

from __future__ import annotations

import httpx

from mailroom.providers.base import AuthError
from tests.emulators.graph.server import GraphEmulator


class EmulatorTokens:
    """Holds an access and refresh token; a refused token is refreshed (with rotation)."""

    def __init__(self, emulator: GraphEmulator, address: str | None = None) -> None:
        self.token_url = emulator.token_url()
        tokens = emulator.issue_tokens(address)
        self.access = str(tokens["access_token"])
        self.refresh_token = str(tokens["refresh_token"])
        self.refreshes = 0

    def __call__(self, stale: str | None = None) -> str:
        """The access token; a fresh one when ``stale`` was refused."""
        if stale is None or stale != self.access:
            return self.access
        response = httpx.post(
            self.token_url,
            data={
                "grant_type": "refresh_token",
                "client_id": "mailroom-test",
                "refresh_token": self.refresh_token,
            },
        )
        if response.status_code != 200:
            raise AuthError("Microsoft refused the account's sign-in; sign in again.")
        body = response.json()
        self.access, self.refresh_token = body["access_token"], body["refresh_token"]
        self.refreshes += 1
        return self.access
