"""Fixtures of the OAuth tests: the local authorization server and settings that reach it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mailroom.config import SecretStr, Settings
from mailroom.secrets import generate_key
from tests.oauth.server import AuthServer, RunningServer

CLIENT_ID = "desktop-client.apps.example"
CLIENT_SECRET = "desktop-secret-Xq7"
PUBLIC_CLIENT_ID = "0a1b2c3d-public"


@pytest.fixture
def auth_server() -> Iterator[AuthServer]:
    """A running authorization server knowing a confidential and a public client."""
    auth = AuthServer(clients={CLIENT_ID: CLIENT_SECRET, PUBLIC_CLIENT_ID: None})
    running = RunningServer(auth)
    try:
        yield auth
    finally:
        running.stop()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """A fresh master key, and 127.0.0.1 allow-listed as the IMAP tests do."""
    return Settings(
        master_key=SecretStr(generate_key()),
        allowed_private_hosts="127.0.0.1",
        data_dir=tmp_path / "data",
    )
