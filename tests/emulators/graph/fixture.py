"""The ``graph_emulator`` pytest fixture: a fresh emulator per test, stopped after it.

Import it into a ``conftest.py`` to use it (``from tests.emulators.graph.fixture
import graph_emulator``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.emulators.graph.server import GraphEmulator


@pytest.fixture
def graph_emulator() -> Iterator[GraphEmulator]:
    """A Graph emulator on a free 127.0.0.1 port with one empty mailbox."""
    with GraphEmulator() as emulator:
        yield emulator
