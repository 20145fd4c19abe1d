"""Webhook deliveries of an owner whose mail is sealed: stored sealed, sent clear and signed."""

from __future__ import annotations

import json
import os
from pathlib import Path

from sqlalchemy import select, text

from mailroom.crypto import MasterKeyWrapper
from mailroom.crypto.datakeys import OwnerKeys
from mailroom.crypto.fields import from_text, version_of
from mailroom.crypto.owner_rotation import Rotator, start_rotation
from mailroom.crypto.sealing import MailSealing
from mailroom.store.engine import Store
from mailroom.store.models import WebhookDelivery
from mailroom.webhooks import signing
from mailroom.webhooks.worker import WebhookWorker
from tests.factories import make_message
from tests.helpers import ingest
from tests.webhooks.support import Clock, Receiver, endpoint_for, hook_settings, live_account

SUBJECT = "Otter sanctuary budget"
SENDER = "treasurer@otters.example"


def _stored_bodies(store: Store) -> list[str]:
    with store.engine.connect() as conn:
        return [str(b) for b in conn.execute(text("SELECT body FROM webhook_deliveries")).scalars()]


def test_a_sealed_owners_delivery_is_stored_sealed_and_arrives_clear(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    wrapper = MasterKeyWrapper(os.urandom(32))
    store.sealing = MailSealing(wrapper, seal_new_mail=True)
    settings = hook_settings(tmp_path)
    account = live_account(store)
    _endpoint, secret = endpoint_for(store, settings, receiver.url, account[0])
    raw = make_message("otters@hook.test", subject=SUBJECT, sender=f"Treasurer <{SENDER}>")
    ingest(store, account, [("o1", raw)])
    clock = Clock()
    receiver.answers = [503]  # the first attempt fails: the delivery waits, sealed, in the table
    worker = WebhookWorker(store, settings, clock=clock)
    worker.run_once()

    (stored,) = _stored_bodies(store)
    assert stored.startswith("mrf1.")
    assert SUBJECT not in stored and SENDER not in stored and "otters@hook.test" not in stored

    # An owner key rotation re-encrypts the waiting body; it still opens and is sent.
    with store.session() as session:
        rotation = start_rotation(session, OwnerKeys(session, wrapper), account[0])
        session.flush()
        rotation_id = rotation.id
    Rotator(store, wrapper, batch=1).run(rotation_id)
    (rotated,) = _stored_bodies(store)
    assert version_of(from_text(rotated)) == 2

    with store.session() as session:
        session.execute(select(WebhookDelivery)).scalar_one().next_attempt_at = clock()
    worker.run_once()
    worker.close()
    request = receiver.requests[-1]
    event = json.loads(request.body)
    assert event["type"] == "messageNew"
    assert event["data"]["subject"] == SUBJECT
    assert event["data"]["from"]["email"] == SENDER
    headers = request.headers
    assert signing.verify(
        secret,
        event["id"],
        headers["Mailroom-Webhook-Timestamp"],
        request.body,
        headers["Mailroom-Signature"],
        now=clock().timestamp(),
    )
