"""Crypto test fixtures: a master key wrapper and a user on the test store."""

from __future__ import annotations

import os

import pytest

from mailroom.crypto import MasterKeyWrapper
from mailroom.owners import get_or_create_user
from mailroom.store.engine import Store


@pytest.fixture
def wrapper() -> MasterKeyWrapper:
    """A master key wrapper over a fresh random key."""
    return MasterKeyWrapper(os.urandom(32))


def add_owner(store: Store, name: str) -> int:
    """Create user ``name``; its id."""
    with store.session() as session:
        return get_or_create_user(session, name).id
