"""What the thread view and action tests share: a signed-in client and thread lookups."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from mailroom.store.engine import Store
from tests.helpers import thread_of
from tests.web.conftest import browser, sign_in


@pytest.fixture(name="me")
def signed_in_me(server: str, account: tuple[int, int, int]) -> Iterator[httpx.Client]:
    """A browser signed in as ``me`` (the test module's ``account`` fixture makes the user)."""
    client = browser(server)
    assert sign_in(client, server, "me").status_code == 303
    yield client
    client.close()


def thread_id_of(store: Store, message_id: str) -> int:
    """The thread of the message with this Message-ID (it must exist)."""
    found = thread_of(store, message_id)
    assert found is not None
    return found
