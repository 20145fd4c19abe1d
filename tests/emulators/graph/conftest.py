"""Fixtures of the Graph emulator's own tests: the emulator and an httpx client signed in."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.emulators.graph.fixture import graph_emulator
from tests.emulators.graph.server import GraphEmulator

__all__ = ["graph", "graph_emulator"]


@pytest.fixture
def graph(graph_emulator: GraphEmulator) -> Iterator[httpx.Client]:
    """An httpx client on the emulator's ``/v1.0`` with a valid bearer token."""
    token = graph_emulator.issue_tokens()["access_token"]
    with httpx.Client(
        base_url=graph_emulator.graph_url, headers={"Authorization": f"Bearer {token}"}
    ) as client:
        yield client
