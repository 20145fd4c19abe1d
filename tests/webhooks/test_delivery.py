"""Webhook delivery to a real receiver on loopback: once per event, signed, retried, dead."""

from __future__ import annotations

import json
import threading
from datetime import timedelta
from pathlib import Path

from sqlalchemy import select

from mailroom.store.engine import Store
from mailroom.store.models import WebhookDelivery, WebhookEndpoint
from mailroom.webhooks import signing
from mailroom.webhooks.deliveries import LEASE, MAX_ATTEMPTS, claim_due, replay
from mailroom.webhooks.listing import dead_list
from mailroom.webhooks.worker import WebhookWorker
from tests.webhooks.support import (
    Clock,
    Receiver,
    drive,
    hooked,
    new_mail,
)


def test_new_mail_arrives_signed_and_the_documented_check_verifies_it(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """A messageNew POST carries id, timestamp and a v1 signature that verify() accepts."""
    hook = hooked(store, tmp_path, receiver.url, mail=1)
    settings = hook.settings
    secret = hook.secret
    clock = Clock()
    worker = WebhookWorker(store, settings, clock=clock)
    worker.run_once()
    worker.close()
    [request] = receiver.requests
    event = json.loads(request.body)
    assert event["type"] == "messageNew" and set(event) == {"id", "type", "created", "data"}
    assert event["data"]["messageId"] == "m0@hook.test"
    headers = request.headers
    assert headers["Mailroom-Webhook-Id"] == event["id"]
    assert headers["Mailroom-Signature"].startswith("v1=")
    now = clock().timestamp()
    stamp = headers["Mailroom-Webhook-Timestamp"]
    good = signing.verify(
        secret, event["id"], stamp, request.body, headers["Mailroom-Signature"], now=now
    )
    assert good
    tampered = request.body.replace(b"m0@hook.test", b"m1@hook.test")
    assert not signing.verify(
        secret, event["id"], stamp, tampered, headers["Mailroom-Signature"], now=now
    )
    assert not signing.verify(
        "whsec_wrong", event["id"], stamp, request.body, headers["Mailroom-Signature"], now=now
    )
    assert not signing.verify(
        secret, event["id"], stamp, request.body, headers["Mailroom-Signature"], now=now + 3600
    )


def test_each_event_arrives_once_under_retries(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """Events answered 500 are retried after the backoff and accepted exactly once each."""
    hook = hooked(store, tmp_path, receiver.url, mail=3)
    settings = hook.settings
    receiver.answers = [500, 503, 500]
    clock = Clock()
    worker = WebhookWorker(store, settings, clock=clock)
    worker.run_once()
    assert receiver.accepted_ids() == []
    drive(worker, clock, rounds=4, step=timedelta(minutes=2))
    worker.close()
    accepted = receiver.accepted_ids()
    assert len(accepted) == 3 and len(set(accepted)) == 3
    assert len(receiver.requests) == 6


def test_two_workers_at_once_deliver_each_event_once(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """Two workers running rounds at the same time never POST one event twice."""
    hook = hooked(store, tmp_path, receiver.url, mail=30)
    settings = hook.settings
    clock = Clock()
    workers = [WebhookWorker(store, settings, clock=clock) for _ in range(2)]
    start = threading.Barrier(2)

    def work(worker: WebhookWorker) -> None:
        start.wait()
        for _ in range(3):
            worker.run_once()

    threads = [threading.Thread(target=work, args=(w,)) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for worker in workers:
        worker.close()
    ids = [r.headers["Mailroom-Webhook-Id"] for r in receiver.requests]
    assert len(ids) == 30 and len(set(ids)) == 30


def test_a_receiver_that_is_down_gets_the_event_after_it_comes_back(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """A refused connection is an attempt; after the backoff the event reaches the receiver."""
    hook = hooked(store, tmp_path, receiver.url)
    settings, account = hook.settings, hook.account
    receiver.down()
    new_mail(store, account, 1)
    clock = Clock()
    worker = WebhookWorker(store, settings, clock=clock)
    worker.run_once()
    with store.session() as session:
        delivery = session.scalars(select(WebhookDelivery)).one()
        assert (delivery.state, delivery.attempts) == ("pending", 1)
        assert delivery.last_error and "could not be reached" in delivery.last_error
        due = delivery.next_attempt_at
    assert timedelta(seconds=20) <= due - clock() <= timedelta(seconds=40)
    receiver.up()
    worker.run_once()  # not due yet
    assert receiver.requests == []
    clock.advance(timedelta(seconds=45))
    worker.run_once()
    worker.close()
    assert len(receiver.accepted_ids()) == 1


def test_dead_after_max_attempts_and_replay_delivers_it(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """Ten failed attempts dead-letter the event; a replay sends it again with the same id."""
    hook = hooked(store, tmp_path, receiver.url, mail=1)
    settings = hook.settings
    receiver.default = 500
    clock = Clock()
    worker = WebhookWorker(store, settings, clock=clock)
    drive(worker, clock, rounds=MAX_ATTEMPTS + 2, step=timedelta(hours=7))
    assert len(receiver.requests) == MAX_ATTEMPTS
    with store.session() as session:
        [dead] = dead_list(session)
    assert dead.attempts == MAX_ATTEMPTS and dead.last_code == 500
    receiver.default = 200
    with store.session() as session:
        replay(session, dead.id, clock())
    worker.run_once()
    worker.close()
    assert receiver.accepted_ids() == [dead.event_id]
    with store.session() as session:
        assert dead_list(session) == []


def test_backoff_grows_to_hours(store: Store, tmp_path: Path, receiver: Receiver) -> None:
    """Successive failures wait longer each time (exponential), never more than six hours."""
    hook = hooked(store, tmp_path, receiver.url, mail=1)
    settings = hook.settings
    receiver.default = 500
    clock = Clock()
    worker = WebhookWorker(store, settings, clock=clock)
    waits = []
    for _ in range(MAX_ATTEMPTS - 1):
        worker.run_once()
        with store.session() as session:
            due = session.scalars(select(WebhookDelivery.next_attempt_at)).one()
        waits.append(due - clock())
        clock.now = due
    worker.close()
    assert all(later > earlier for earlier, later in zip(waits, waits[1:], strict=False))
    assert waits[0] < timedelta(minutes=1) and timedelta(hours=1) < waits[-1] <= timedelta(hours=6)


def test_410_disables_the_endpoint(store: Store, tmp_path: Path, receiver: Receiver) -> None:
    """An endpoint answering 410 Gone is disabled and gets nothing more."""
    hook = hooked(store, tmp_path, receiver.url, mail=1)
    settings, account = hook.settings, hook.account
    endpoint_id = hook.endpoint_id
    receiver.default = 410
    clock = Clock()
    worker = WebhookWorker(store, settings, clock=clock)
    worker.run_once()
    new_mail(store, account, 1, prefix="later")
    drive(worker, clock, rounds=2, step=timedelta(hours=1))
    worker.close()
    assert len(receiver.requests) == 1
    with store.session() as session:
        endpoint = session.get(WebhookEndpoint, endpoint_id)
        assert endpoint is not None and not endpoint.active
        assert endpoint.disabled_reason and "410" in endpoint.disabled_reason


def test_a_killed_workers_delivery_is_sent_after_its_lease(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """A delivery claimed by a worker that died is due again once the lease ran out."""
    hook = hooked(store, tmp_path, receiver.url, mail=1)
    settings, account = hook.settings, hook.account
    clock = Clock()
    worker = WebhookWorker(store, settings, clock=clock)
    worker.run_once()  # derives and delivers; make a second event for the dead worker
    new_mail(store, account, 1, prefix="orphan")
    from mailroom.webhooks.derive import derive_all

    derive_all(store, clock())
    [claimed] = claim_due(store, clock(), 10)  # the worker that claimed it dies here
    worker.run_once()
    assert len(receiver.requests) == 1
    clock.advance(LEASE + timedelta(seconds=1))
    worker.run_once()
    worker.close()
    assert receiver.accepted_ids()[-1] == claimed.event_id
    assert len(receiver.requests) == 2
