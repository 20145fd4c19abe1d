"""The ``graph_emulator`` pytest fixture (a fresh emulator per test, stopped after it).

Import it into a ``conftest.py`` to use it (``from tests.emulators.graph.fixture
import graph_emulator``). :func:`wait_for` waits for a state of the emulator
(a count of requests in flight) without assuming how fast the machine is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from tests.emulators.graph.server import GraphEmulator


@pytest.fixture
def graph_emulator() -> Iterator[GraphEmulator]:
    """A Graph emulator on a free 127.0.0.1 port with one empty mailbox."""
    with GraphEmulator() as emulator:
        yield emulator


def wait_for(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    """Poll until ``predicate()`` is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)
