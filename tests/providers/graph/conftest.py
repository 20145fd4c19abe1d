"""Fixtures for mailroom's Graph client: the emulator and a client signed in to it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mailroom.providers.graph import GraphClient, MailboxLimiter, TokenSource
from tests.emulators.graph.fixture import graph_emulator
from tests.emulators.graph.server import GraphEmulator
from tests.providers.graph.tokens import EmulatorTokens

__all__ = ["graph_emulator", "make_client", "tokens"]

LOOPBACK = ("127.0.0.1",)  # the SSRF guard's allow-list, as the IMAP tests set it


@pytest.fixture
def tokens(graph_emulator: GraphEmulator) -> EmulatorTokens:
    """Tokens of the emulator's default mailbox, refreshable."""
    return EmulatorTokens(graph_emulator)


@pytest.fixture
def make_client(
    graph_emulator: GraphEmulator, tokens: EmulatorTokens
) -> Iterator[Callable[..., GraphClient]]:
    """Build clients on the emulator (closed after the test); options override the defaults.

    Each test gets its own limiter, and ``sleeps`` records the waits instead of sleeping.
    """
    made: list[GraphClient] = []
    limiter = MailboxLimiter()

    def build(source: TokenSource | None = None, **options: Any) -> GraphClient:
        settings: dict[str, Any] = {
            "account": 1,
            "base_url": graph_emulator.graph_url,
            "allowed_private_hosts": LOOPBACK,
            "limiter": limiter,
            **options,
        }
        client = GraphClient(source or tokens, **settings)
        made.append(client)
        return client

    yield build
    for client in made:
        client.close()
