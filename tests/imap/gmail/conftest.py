"""Fixtures for Gmail over IMAP: the Gmail IMAP emulator and a mailroom account on it.

``gmail`` is a fresh emulator (``tests.emulators.gmail_imap``) on 127.0.0.1 per test;
``gmail_account`` is a mailroom IMAP account for it (plain IMAP, 127.0.0.1 allow-listed
by the ``settings`` fixture of ``tests/imap/conftest.py``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mailroom.config import Settings
from mailroom.providers.imap import add_imap_account
from mailroom.store.engine import Store
from tests.emulators.gmail_imap import GmailImapServer

USER = "me@gmail.com"
PASSWORD = "app-password-1234"


@pytest.fixture
def gmail() -> Iterator[GmailImapServer]:
    """A fresh Gmail IMAP emulator for this test."""
    with GmailImapServer(USER, PASSWORD) as server:
        yield server


@pytest.fixture
def gmail_account(store: Store, settings: Settings, gmail: GmailImapServer) -> int:
    """The id of a mailroom IMAP account on the emulator."""
    return add_imap_account(
        store,
        settings,
        name="gmail",
        host=gmail.host,
        port=gmail.port,
        tls="none",
        login=USER,
        password=PASSWORD,
        owner="me",
    )
