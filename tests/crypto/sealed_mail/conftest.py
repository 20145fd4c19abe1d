"""Sealed-mail fixtures: the test store with a master key and MAILROOM_ENCRYPT_MAIL on."""

from __future__ import annotations

import os

import pytest

from mailroom.crypto import MasterKeyWrapper
from mailroom.crypto.sealing import MailSealing
from mailroom.store.engine import Store
from tests.factories import make_message

BODY_PHRASE = "the sealed walrus recites poetry at dawn"
HEADER_VALUE = "tunnel under the river"
SUBJECT = "Quarterly hangar forecast"


def sealed_message(message_id: str = "sealed-1@example.org", phrase: str = BODY_PHRASE) -> bytes:
    """A message whose body phrase and one header must never be found in the store's files."""
    return make_message(
        message_id,
        subject=SUBJECT,
        body=f"Hello,\n{phrase}\n",
        headers={"X-Secret-Plan": HEADER_VALUE},
    )


@pytest.fixture
def sealing() -> MailSealing:
    """Sealing with a fresh random master key, new mail sealed."""
    return MailSealing(MasterKeyWrapper(os.urandom(32)), seal_new_mail=True)


@pytest.fixture
def sealed_store(store: Store, sealing: MailSealing) -> Store:
    """The test store (both kinds) sealing new mail."""
    store.sealing = sealing
    return store
