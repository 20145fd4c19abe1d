"""Fixtures of the webhook tests: a receiver on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.webhooks.support import Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A recording HTTP receiver on 127.0.0.1, stopped after the test."""
    server = Receiver()
    yield server
    server.down()
