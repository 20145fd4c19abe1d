"""Fixtures of the Gmail emulator's own tests."""

from tests.emulators.gmail.fixtures import gmail_emulator

__all__ = ["gmail_emulator"]
