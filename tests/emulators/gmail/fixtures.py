"""The ``gmail_emulator`` fixture (import it into a conftest to use it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.emulators.gmail.emulator import GmailEmulator


@pytest.fixture
def gmail_emulator() -> Iterator[GmailEmulator]:
    """A fresh, empty emulated mailbox listening on 127.0.0.1 for one test."""
    with GmailEmulator() as gmail:
        yield gmail
