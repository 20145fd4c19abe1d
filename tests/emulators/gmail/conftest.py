"""Fixtures of the Gmail emulator's own tests: the emulator and a plain httpx client on it."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.emulators.gmail.emulator import GmailEmulator
from tests.emulators.gmail.fixtures import gmail_emulator

__all__ = ["gmail_emulator", "http"]

API = "/gmail/v1/users/me"


@pytest.fixture
def http(gmail_emulator: GmailEmulator) -> Iterator[httpx.Client]:
    """An httpx client on the emulator carrying a live access token."""
    headers = {"Authorization": f"Bearer {gmail_emulator.access_token()}"}
    with httpx.Client(base_url=gmail_emulator.url, headers=headers) as client:
        yield client
