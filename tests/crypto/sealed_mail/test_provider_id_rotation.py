"""An owner key rotation re-names keyed IMAP provider ids; what it cannot account for stays."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import select, update

from mailroom.crypto.datakeys import OwnerKeys
from mailroom.crypto.owner_rotation import Rotator, start_rotation
from mailroom.crypto.sealing import MailSealing
from mailroom.providers.imap.namer import ImapNamer
from mailroom.store.engine import Store
from mailroom.store.models import Message
from tests.crypto.sealed_mail.conftest import sealed_message
from tests.helpers import ingest, make_account


def _provider_ids(store: Store, ids: list[int]) -> dict[int, str]:
    with store.session() as session:
        rows = session.execute(select(Message.id, Message.provider_id).where(Message.id.in_(ids)))
        return {int(message_id): pid for message_id, pid in rows}


def test_the_rotation_renames_keyed_ids_and_leaves_the_unaccounted(
    sealed_store: Store, sealing: MailSealing, caplog: pytest.LogCaptureFixture
) -> None:
    account = make_account(sealed_store)
    owner = account[0]
    mids = [f"rot-{n}@example.org" for n in range(4)]
    raws = [(str(n), sealed_message(mid)) for n, mid in enumerate(mids)]
    ids = sorted(ingest(sealed_store, account, raws).created_ids)
    with sealed_store.session() as session:
        namer = ImapNamer.of(session, owner)
        named = {
            ids[0]: namer.name(mids[0], 100),
            ids[1]: namer.name(mids[1], 200),
            ids[2]: namer.name("not-in-its-headers@example.org", 300),  # unaccounted
            ids[3]: f"mid:{mids[3]}:400",  # stored clear before sealing
        }
        for message_id, pid in named.items():
            session.execute(update(Message).where(Message.id == message_id).values(provider_id=pid))
        rotation = start_rotation(session, OwnerKeys(session, sealing.wrapper), owner).id
    with caplog.at_level(logging.WARNING):
        Rotator(sealed_store, sealing.wrapper, batch=1).run(rotation)
    after = _provider_ids(sealed_store, ids)
    with sealed_store.session() as session:
        fresh = ImapNamer.of(session, owner)  # only the new version is left
        assert after[ids[0]] == fresh.name(mids[0], 100) != named[ids[0]]
        assert after[ids[1]] == fresh.name(mids[1], 200) != named[ids[1]]
        assert fresh.matches(after[ids[0]], mids[0], 100)
    assert after[ids[2]] == named[ids[2]]
    assert after[ids[3]] == named[ids[3]]
    assert "keyed provider id(s) not named by their message's stored Message-ID" in caplog.text
