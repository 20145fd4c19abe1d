"""Which events are derived from what mailroom records: mail, sending and accounts."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from sqlalchemy import select

from mailroom.config import Settings
from mailroom.jobs.status import record_failure
from mailroom.labels.operations import Operations
from mailroom.outbound.sender import Sender
from mailroom.providers.base import AuthError
from mailroom.store.engine import Store
from mailroom.store.models import Account, AccountEvent, Message, utcnow
from mailroom.webhooks.worker import WebhookWorker
from tests.helpers import ingest, make_account
from tests.outbound.core_support import Clock as SendClock
from tests.outbound.core_support import account_for, queue
from tests.support.smtp_sink import SmtpSink
from tests.webhooks.support import (
    Clock,
    Receiver,
    endpoint_for,
    hook_settings,
    live_account,
    new_mail,
)


def _events(receiver: Receiver) -> list[dict[str, object]]:
    return [json.loads(request.body) for request in receiver.requests]


def _run(store: Store, settings: Settings, clock: Callable[[], datetime] | None = None) -> None:
    worker = WebhookWorker(store, settings, clock=clock or Clock())
    worker.run_once()
    worker.close()


def test_account_events_come_from_the_accounts_own_changes(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """Import finished, refused credentials and a status back to active are each one event."""
    settings = hook_settings(tmp_path)
    user_id, account_id, _ = make_account(store)
    endpoint_for(store, settings, receiver.url, user_id)
    with store.session() as session:
        account = session.get(Account, account_id)
        assert account is not None
        account.import_finished_at = utcnow()
    record_failure(store, account_id, AuthError("The server refused the password."))
    record_failure(store, account_id, AuthError("Still refused."))  # no status change
    with store.session() as session:
        account = session.get(Account, account_id)
        assert account is not None
        account.status = "active"
    _run(store, settings)
    kinds = [(e["type"], e["data"]["status"]) for e in _events(receiver)]  # type: ignore[index]
    assert kinds == [
        ("accountInitialized", "active"),
        ("accountStatusChanged", "auth_error"),
        ("authenticationError", "auth_error"),
        ("accountStatusChanged", "active"),
    ]
    auth = _events(receiver)[2]["data"]
    assert auth["reason"] == "The server refused the password."  # type: ignore[index]
    assert auth["previousStatus"] == "active" and auth["account"] == "test"  # type: ignore[index]


def test_account_events_are_written_in_the_same_transaction(store: Store) -> None:
    """A status change that rolls back leaves no account event behind."""
    _, account_id, _ = make_account(store)
    try:
        with store.session() as session:
            account = session.get(Account, account_id)
            assert account is not None
            account.status = "auth_error"
            session.flush()
            assert session.scalars(select(AccountEvent.type)).all()
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    with store.session() as session:
        assert session.scalars(select(AccountEvent)).all() == []


def test_history_from_an_import_is_not_message_new(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """Mail stored while the import runs is announced by accountInitialized, not one by one."""
    settings = hook_settings(tmp_path)
    account = make_account(store)
    endpoint_for(store, settings, receiver.url, account[0])
    new_mail(store, account, 3, prefix="old")
    _run(store, settings)
    assert receiver.requests == []
    with store.session() as session:
        row = session.get(Account, account[1])
        assert row is not None
        row.import_finished_at = utcnow()
    new_mail(store, account, 1, prefix="new")
    _run(store, settings)
    events = _events(receiver)
    assert [e["type"] for e in events] == ["accountInitialized", "messageNew"]
    assert events[1]["data"]["messageId"] == "new0@hook.test"  # type: ignore[index]


def test_updates_and_deletes_of_mail(store: Store, tmp_path: Path, receiver: Receiver) -> None:
    """Starring a message is messageUpdated, deleting it for ever messageDeleted."""
    settings = hook_settings(tmp_path)
    account = live_account(store)
    new_mail(store, account, 2)
    endpoint_for(store, settings, receiver.url, account[0])  # after the mail: no messageNew
    with store.session() as session:
        first, second = session.scalars(select(Message.id).order_by(Message.id)).all()
        Operations(session, account[0]).star([first])
    _run(store, settings)
    with store.session() as session:
        Operations(session, account[0]).delete_forever([second])
    _run(store, settings)
    events = _events(receiver)
    assert [(e["type"], e["data"]["emailId"]) for e in events] == [  # type: ignore[index]
        ("messageUpdated", first),
        ("messageDeleted", second),
    ]


def test_only_the_event_types_an_endpoint_asked_for(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """An endpoint that wants account status changes gets no messageNew."""
    settings = hook_settings(tmp_path)
    account = live_account(store)
    endpoint_for(store, settings, receiver.url, account[0], ["accountStatusChanged"])
    new_mail(store, account, 2)
    record_failure(store, account[1], AuthError("Refused."))
    _run(store, settings)
    assert [e["type"] for e in _events(receiver)] == ["accountStatusChanged"]


def test_other_users_events_stay_with_them(
    store: Store, tmp_path: Path, receiver: Receiver
) -> None:
    """An endpoint hears about its own user's mail only."""
    settings = hook_settings(tmp_path)
    mine = live_account(store, owner="me")
    theirs = live_account(store, owner="them")
    endpoint_for(store, settings, receiver.url, mine[0])
    new_mail(store, theirs, 2, prefix="theirs")
    new_mail(store, mine, 1, prefix="mine")
    _run(store, settings)
    assert [e["data"]["messageId"] for e in _events(receiver)] == [  # type: ignore[index]
        "mine0@hook.test"
    ]


def test_sent_and_failed_mail(store: Store, tmp_path: Path, receiver: Receiver) -> None:
    """A submission the server accepted is messageSent, one it refused messageFailed."""
    settings = hook_settings(tmp_path)
    with SmtpSink() as sink:
        account_id = account_for(store, sink)
        with store.session() as session:
            user_id = session.scalar(select(Account.user_id).where(Account.id == account_id))
        assert user_id is not None
        endpoint_for(store, settings, receiver.url, user_id)
        clock = SendClock(utcnow())  # mail sent before an endpoint existed is not announced to it
        sent = queue(store, settings, account_id, 1, clock)
        refused = queue(store, settings, account_id, 2, clock, lane="direct")
        sender = Sender(store, settings, clock=clock)
        sender.run_lane("calm")
        sink.script(["550 5.1.1 no such mailbox"])
        sender.run_lane("direct")
        sender.close()
    _run(store, settings, clock)
    events = {e["type"]: e["data"] for e in _events(receiver)}
    assert set(events) == {"messageSent", "messageFailed"}
    assert events["messageSent"]["submissionId"] == sent  # type: ignore[index]
    assert events["messageSent"]["recipients"] == ["bob@example.net"]  # type: ignore[index]
    assert events["messageFailed"]["submissionId"] == refused  # type: ignore[index]
    assert "no such mailbox" in str(events["messageFailed"]["reason"])  # type: ignore[index]


def test_a_bounce_of_sent_mail(store: Store, tmp_path: Path, receiver: Receiver) -> None:
    """A delivery report naming a sent submission is messageBounced with the report's verdicts."""
    from mailroom.outbound.bounces import recognise_bounces
    from tests.outbound.after_support import local_sender, send
    from tests.outbound.test_after_bounces import _hello, dsn

    settings = hook_settings(tmp_path)
    with SmtpSink() as sink:
        account = local_sender(store, settings, sink)
        endpoint_for(store, settings, receiver.url, account[0])
        submission = send(store, settings, account[1], _hello())
    _run(store, settings)
    stored = ingest(store, account, [("dsn", dsn())])
    recognise_bounces(store, stored.created_ids)
    _run(store, settings)
    events = _events(receiver)
    assert [e["type"] for e in events] == ["messageSent", "messageBounced"]
    bounced = events[1]["data"]
    assert bounced["submissionId"] == submission  # type: ignore[index]
    report = bounced["report"]  # type: ignore[index]
    assert [r["action"] for r in report] == ["failed", "delayed"]
