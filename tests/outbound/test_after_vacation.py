"""The vacation response answers live Inbox mail once per sender and period, never automatic."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from email import message_from_bytes, policy
from email.message import EmailMessage

import pytest
from sqlalchemy import func, select

from mailroom.config import Settings
from mailroom.ingest import IncomingMessage, commit_batch
from mailroom.jobs.runtime import Runtime
from mailroom.labels.resolver import system_label
from mailroom.outbound.sender import Sender
from mailroom.outbound.vacation import RESEND_AFTER, VacationResponder, refusal
from mailroom.store.engine import Store
from mailroom.store.models import Blob, Submission, VacationReply, VacationResponse, utcnow
from tests.factories import make_message
from tests.outbound.after_support import (
    ME,
    drain_follow_up,
    local_sender,
    settings,
)
from tests.support.smtp_sink import SmtpSink

__all__ = ["settings"]  # fixtures, imported for pytest

OWN = frozenset({ME})
NOW = utcnow().replace(microsecond=0)


def _headers(**fields: str) -> list[list[str]]:
    base = {"From": "Alice <alice@example.net>", "To": f"Me <{ME}>", "Subject": "Lunch"}
    base.update({name.replace("_", "-"): value for name, value in fields.items()})
    return [[name, value] for name, value in base.items() if value]


def test_a_personal_message_may_be_answered() -> None:
    """Plain mail from a person to me (To or Cc), Auto-Submitted: no included."""
    assert refusal(_headers(), OWN) is None
    assert refusal(_headers(To="team@example.net", Cc=ME), OWN) is None
    assert refusal(_headers(Auto_Submitted="no"), OWN) is None


@pytest.mark.parametrize(
    "fields",
    [
        {"Auto_Submitted": "auto-replied"},
        {"Auto_Submitted": "auto-generated; type=calendar"},
        {"Precedence": "bulk"},
        {"Precedence": "list"},
        {"Precedence": "junk"},
        {"List_Id": "<friends.lists.example.net>"},
        {"List_Unsubscribe": "<mailto:leave@lists.example.net>"},
        {"X_Auto_Response_Suppress": "OOF, AutoReply"},
        {"Return_Path": "<>"},
        {"From": "MAILER-DAEMON@mx.example.net"},
        {"From": "Shop <no-reply@shop.example.com>"},
        {"From": "noreply@example.com"},
        {"From": "Ann <ann@example.net>", "Return_Path": "<friends-bounces@lists.example.net>"},
        {"From": f"Me <{ME}>"},
        {"From": "undisclosed"},
        {"To": "team@example.net"},
    ],
    ids=lambda fields: ",".join(f"{k}={v}" for k, v in fields.items()),
)
def test_automatic_list_and_foreign_mail_is_never_answered(fields: dict[str, str]) -> None:
    """RFC 3834 §2: auto-submitted, list, bulk, no-reply, own or indirect mail gets no reply."""
    assert refusal(_headers(**fields), OWN) is not None


def _vacation(
    store: Store,
    user_id: int,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    text: str | None = "Back on Monday.",
    html: str | None = None,
    subject: str | None = None,
    enabled: bool = True,
) -> None:
    with store.session() as session:
        row = session.get(VacationResponse, user_id) or VacationResponse(user_id=user_id)
        row.is_enabled = enabled
        row.from_date = start if start is not None else NOW - timedelta(days=1)
        row.to_date = end if end is not None else NOW + timedelta(days=30)
        row.text_body, row.html_body, row.subject = text, html, subject
        row.updated_at = NOW - timedelta(days=2)
        session.merge(row)


def _arrive(
    store: Store,
    account: tuple[int, int, int],
    raw: bytes,
    *,
    at: datetime = NOW,
    role: str = "inbox",
) -> list[int]:
    user_id, account_id, _inbox = account
    with store.session() as session:
        label = system_label(session, user_id, role).id
    item = IncomingMessage(f"p-{hash(raw)}", raw, label_ids=[label], received_at=at)
    return commit_batch(store, account_id, user_id, [item]).created_ids


def _mail(mid: str, sender: str = "Alice <alice@example.net>", **headers: str) -> bytes:
    return make_message(
        mid,
        subject="Lunch",
        sender=sender,
        to=f"Me <{ME}>",
        references=["older@example.net"],
        headers={k.replace("_", "-"): v for k, v in headers.items()},
    )


def _replies(store: Store) -> list[EmailMessage]:
    with store.session() as session:
        rows = session.execute(
            select(Submission.kind, Blob.data)
            .join(Blob, Blob.sha256 == Submission.raw_sha256)
            .order_by(Submission.id)
        ).all()
    assert {kind for kind, _ in rows} <= {"vacation"}
    parsed = [message_from_bytes(bytes(data), policy=policy.default) for _, data in rows]
    return [m for m in parsed if isinstance(m, EmailMessage)]


def test_a_live_message_is_answered_once_per_sender_and_the_reply_is_sent(
    store: Store, settings: Settings, sink: SmtpSink
) -> None:
    """One reply to Alice (however often she writes), one to Bob; it reaches the sink."""
    account = local_sender(store, settings, sink)
    _vacation(store, account[0])
    responder = VacationResponder(settings, clock=lambda: NOW)
    responder(store, _arrive(store, account, _mail("m1@example.net")))
    responder(store, _arrive(store, account, _mail("m2@example.net")))
    first = _arrive(store, account, _mail("m3@example.net", sender="Bob <bob@example.net>"))
    responder(store, first)
    responder(store, first)  # a repeated job answers nothing twice
    alice, bob = _replies(store)
    assert alice["To"] == "alice@example.net" and bob["To"] == "bob@example.net"
    assert ME in str(alice["From"])
    assert alice["Auto-Submitted"] == "auto-replied"
    assert alice["Subject"] == "Auto: Lunch"
    assert alice["In-Reply-To"] == "<m1@example.net>"
    assert alice["References"] == "<older@example.net> <m1@example.net>"
    assert alice.get_content().strip() == "Back on Monday."
    sender = Sender(store, settings, clock=lambda: NOW)
    try:
        sender.run_lane("calm")
    finally:
        sender.close()
    assert sorted(m.rcpt_tos for m in sink.messages) == [
        ("alice@example.net",),
        ("bob@example.net",),
    ]
    assert all(b"Auto-Submitted: auto-replied" in m.data for m in sink.messages)


def test_a_sender_is_answered_again_after_a_week_or_in_a_new_period(
    store: Store, settings: Settings, sink: SmtpSink
) -> None:
    """RESEND_AFTER later Alice is answered again; so she is when a new period starts."""
    account = local_sender(store, settings, sink)
    _vacation(store, account[0])
    VacationResponder(settings, clock=lambda: NOW)(store, _arrive(store, account, _mail("a1@x")))
    later = NOW + RESEND_AFTER + timedelta(hours=1)
    arrived = _arrive(store, account, _mail("a2@x"), at=later)
    VacationResponder(settings, clock=lambda: later)(store, arrived)
    assert len(_replies(store)) == 2
    soon = later + timedelta(hours=2)
    _vacation(store, account[0], start=soon - timedelta(hours=1))  # the next vacation
    VacationResponder(settings, clock=lambda: soon)(
        store, _arrive(store, account, _mail("a3@x"), at=soon)
    )
    assert len(_replies(store)) == 3


def test_old_outside_the_period_or_filed_away_mail_gets_no_reply(
    store: Store, settings: Settings, sink: SmtpSink
) -> None:
    """Backlog mail, mail before fromDate or after toDate, Spam, a list, a disabled response."""
    account = local_sender(store, settings, sink)
    _vacation(store, account[0], start=NOW - timedelta(days=60))
    responder = VacationResponder(settings, clock=lambda: NOW)
    responder(store, _arrive(store, account, _mail("old@x"), at=NOW - timedelta(days=20)))
    responder(store, _arrive(store, account, _mail("spam@x"), role="spam"))
    responder(store, _arrive(store, account, _mail("list@x", List_Id="<l.example.net>")))
    _vacation(store, account[0], start=NOW + timedelta(hours=1))
    responder(store, _arrive(store, account, _mail("early@x")))
    _vacation(store, account[0], end=NOW - timedelta(minutes=1))
    responder(store, _arrive(store, account, _mail("late@x")))
    _vacation(store, account[0], enabled=False)
    responder(store, _arrive(store, account, _mail("off@x")))
    assert _replies(store) == []


def test_the_configured_subject_and_html_body_are_used(
    store: Store, settings: Settings, sink: SmtpSink
) -> None:
    """Subject as set; an HTML body goes with a plain-text alternative made from it."""
    account = local_sender(store, settings, sink)
    _vacation(
        store, account[0], subject="Away until May", text=None, html="<p>Back <b>soon</b></p>"
    )
    VacationResponder(settings, clock=lambda: NOW)(store, _arrive(store, account, _mail("h@x")))
    (reply,) = _replies(store)
    assert reply["Subject"] == "Away until May"
    assert reply.get_content_type() == "multipart/alternative"
    plain, rich = reply.get_body(("plain",)), reply.get_body(("html",))
    assert plain is not None and "Back soon" in plain.get_content()
    assert rich is not None and "<b>soon</b>" in rich.get_content()


def test_the_runtime_answers_newly_synced_mail(
    store: Store, settings: Settings, sink: SmtpSink
) -> None:
    """Through the ingest step: the committed batch's follow-up job queues the reply."""
    account = local_sender(store, settings, sink)
    now = utcnow()
    _vacation(store, account[0], start=now - timedelta(hours=1), end=now + timedelta(days=1))
    runtime = Runtime(store, settings)
    try:
        _arrive(store, account, _mail("live@x"), at=now)
        drain_follow_up(runtime.queues)
    finally:
        runtime.stop()
    (reply,) = _replies(store)
    assert reply["In-Reply-To"] == "<live@x>"


def test_a_sealing_owner_is_answered_once_per_sender_named_by_a_keyed_hash(
    store: Store, settings: Settings, sink: SmtpSink
) -> None:
    """While mail is sealed the memo of whom was answered names no address; a rotation
    started meanwhile (the reply memo under the old key version) answers nobody twice."""
    from mailroom.crypto import MasterKeyWrapper
    from mailroom.crypto.datakeys import OwnerKeys
    from mailroom.crypto.owner_rotation import start_rotation
    from mailroom.crypto.sealing import MailSealing

    sealing = MailSealing(MasterKeyWrapper(os.urandom(32)), seal_new_mail=True)
    store.sealing = sealing
    account = local_sender(store, settings, sink)
    _vacation(store, account[0])
    responder = VacationResponder(settings, clock=lambda: NOW)
    responder(store, _arrive(store, account, _mail("s1@example.net")))
    responder(store, _arrive(store, account, _mail("s2@example.net")))
    responder(store, _arrive(store, account, _mail("s3@example.net", sender="bob@example.net")))
    with store.session() as session:
        start_rotation(session, OwnerKeys(session, sealing.wrapper), account[0])
    responder(store, _arrive(store, account, _mail("s4@example.net")))  # Alice again
    with store.session() as session:
        answered = session.execute(
            select(Submission.kind).where(Submission.user_id == account[0])
        ).all()
        memo = session.scalars(select(VacationReply.sender_key)).all()
    assert len(answered) == 2  # Alice and Bob, once each
    assert len(memo) == 2 and all(len(key) == 64 and "@" not in key for key in memo)
    responder(store, _arrive(store, account, _mail("s5@example.net", sender="carol@example.net")))
    with store.session() as session:
        assert session.scalar(select(func.count()).select_from(Submission)) == 3
