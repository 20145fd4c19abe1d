"""Fixtures of the Graph emulator's own tests."""

from tests.emulators.graph.fixture import graph_emulator

__all__ = ["graph_emulator"]
