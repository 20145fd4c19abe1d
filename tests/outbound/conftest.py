"""Fixtures of the sending tests: a plain SMTP sink on loopback and an injected clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.outbound.core_support import Clock
from tests.support.smtp_sink import SmtpSink


@pytest.fixture
def sink() -> Iterator[SmtpSink]:
    """A plain SMTP sink on loopback (no TLS, no AUTH)."""
    with SmtpSink() as running:
        yield running


@pytest.fixture
def clock() -> Clock:
    """A clock at the factories' base time that moves only when told to."""
    return Clock()
