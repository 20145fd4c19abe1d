"""Sealed mail over time: sealing switched off, an owner key rotation, an owner's deletion."""

from __future__ import annotations

from sqlalchemy import select, update

from mailroom.crypto.datakeys import OwnerKeys
from mailroom.crypto.mail_reading import bodies_of, raw_message
from mailroom.crypto.owner_rotation import Rotator, start_rotation
from mailroom.crypto.sealing import MailSealing
from mailroom.crypto.shredding import delete_owner
from mailroom.store.engine import Store
from mailroom.store.models import Blob, Message, MessageBody
from tests.crypto.sealed_mail.conftest import BODY_PHRASE, key_versions, sealed_message
from tests.helpers import ingest, make_account

LATER_PHRASE = "written after sealing was switched off"


def _reads(store: Store, message_id: int, phrase: str) -> bool:
    with store.session() as session:
        body = bodies_of(session, [message_id])[message_id]
        raw = raw_message(session, message_id)
    return phrase in body.text_body and raw is not None and phrase.encode() in raw


def test_switching_sealing_off_keeps_old_mail_readable_and_writes_new_mail_clear(
    sealed_store: Store, sealing: MailSealing
) -> None:
    account = make_account(sealed_store)
    (old,) = ingest(sealed_store, account, [("1", sealed_message())]).created_ids
    sealed_store.sealing = MailSealing(sealing.wrapper, seal_new_mail=False)
    later = sealed_message("later@example.org", LATER_PHRASE)
    (new,) = ingest(sealed_store, account, [("2", later)]).created_ids
    with sealed_store.session() as session:
        assert session.get(MessageBody, old).sealed  # type: ignore[union-attr]
        clear = session.get(MessageBody, new)
        assert clear is not None and not clear.sealed and LATER_PHRASE in clear.text_body
        key = session.scalar(select(Message.raw_sha256).where(Message.id == new))
        blob = session.get(Blob, key)
        assert blob is not None and blob.user_id is None and blob.data == later
    assert _reads(sealed_store, old, BODY_PHRASE)
    assert _reads(sealed_store, new, LATER_PHRASE)


def test_an_owner_key_rotation_reencrypts_bodies_and_blobs(
    sealed_store: Store, sealing: MailSealing
) -> None:
    account = make_account(sealed_store)
    raws = [(str(n), sealed_message(f"m{n}@example.org", f"{BODY_PHRASE} {n}")) for n in range(3)]
    ids = ingest(sealed_store, account, raws).created_ids
    owner = account[0]
    assert key_versions(sealed_store, owner) == {1}
    with sealed_store.session() as session:
        rotation_id = start_rotation(session, OwnerKeys(session, sealing.wrapper), owner).id
    Rotator(sealed_store, sealing.wrapper, batch=2).run(rotation_id)
    assert key_versions(sealed_store, owner) == {2}
    with sealed_store.session() as session:
        assert OwnerKeys(session, sealing.wrapper).versions(owner) == [2]  # v1 is gone
        headers = bodies_of(session, ids)
    for n, message_id in enumerate(sorted(ids)):
        assert _reads(sealed_store, message_id, f"{BODY_PHRASE} {n}")
        assert ["X-Secret-Plan", "tunnel under the river"] in [
            list(h) for h in headers[message_id].headers
        ]


def test_deleting_an_owner_removes_their_sealed_blobs(sealed_store: Store) -> None:
    """Named by one of their messages or by none any more (its message destroyed before)."""
    raw, other = sealed_message(), sealed_message("other@example.org", "an unnamed blob")
    alice = make_account(sealed_store, "alice")
    (named, unnamed) = ingest(sealed_store, alice, [("1", raw), ("2", other)]).created_ids
    with sealed_store.session() as session:
        session.execute(update(Message).where(Message.id == unnamed).values(raw_sha256=None))
    bob = make_account(sealed_store, "bob")
    (kept,) = ingest(sealed_store, bob, [("1", raw)]).created_ids
    deletion = delete_owner(sealed_store, "alice")
    assert deletion.blobs == 2
    with sealed_store.session() as session:
        assert session.scalars(select(Blob.user_id)).all() == [bob[0]]
    assert _reads(sealed_store, kept, BODY_PHRASE)
