"""Sealed-mail fixtures: the test store with a master key and MAILROOM_ENCRYPT_MAIL on."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import select

from mailroom.crypto import MasterKeyWrapper
from mailroom.crypto.fields import from_text, version_of
from mailroom.crypto.sealing import MailSealing
from mailroom.store.engine import Store
from mailroom.store.models import Blob, Message, MessageBody
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


def key_versions(store: Store, owner: int) -> set[int]:
    """The key versions of the owner's sealed body texts and raw messages."""
    with store.session() as session:
        texts = session.scalars(
            select(MessageBody.text_body)
            .join(Message, Message.id == MessageBody.message_id)
            .where(Message.user_id == owner)
        ).all()
        blobs = session.scalars(select(Blob.data).where(Blob.user_id == owner)).all()
    return {version_of(from_text(t)) for t in texts} | {version_of(bytes(b)) for b in blobs}
