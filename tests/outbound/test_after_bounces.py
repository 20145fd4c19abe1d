"""Bounces: delivery reports (RFC 3464, and common non-standard ones) attached to submissions."""

from __future__ import annotations

from email.utils import format_datetime

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.ingest import IncomingMessage, commit_batch
from mailroom.jobs.runtime import Runtime
from mailroom.outbound.bounces import read_report, recognise_bounces
from mailroom.store.engine import Store
from mailroom.store.models import Bounce, Change, Submission, utcnow
from tests.factories import make_message
from tests.helpers import ingest, make_account
from tests.outbound.after_support import (
    ME,
    drain_follow_up,
    local_sender,
    send,
    settings,
)
from tests.support.smtp_sink import SmtpSink

__all__ = ["settings"]  # fixtures, imported for pytest

ORIGINAL = "orig-9@example.org"


def dsn(
    original: str = ORIGINAL,
    *,
    status_part: str | None = None,
    charset: str = "us-ascii",
    returned: str = "text/rfc822-headers",
    report_id: str = "bounce-9@mx.example.net",
) -> bytes:
    """A delivery status notification as Postfix writes one: bob failed, carol delayed."""
    status = status_part or (
        "Reporting-MTA: dns; mx.example.net\n"
        "Arrival-Date: Fri, 1 Mar 2024 09:00:00 +0000\n"
        "\n"
        "Final-Recipient: rfc822; bob@example.net\n"
        "Original-Recipient: rfc822;bob@example.net\n"
        "Action: failed\n"
        "Status: 5.1.1\n"
        "Diagnostic-Code: smtp; 550 5.1.1 <bob@example.net>: Recipient address\n"
        "    rejected: User unknown\n"
        "\n"
        "Final-Recipient: rfc822; carol@example.net\n"
        "Action: delayed\n"
        "Status: 4.4.1\n"
        "Diagnostic-Code: smtp; 451 4.4.1 try again later\n"
    )
    text = (
        "Return-Path: <>\n"
        "From: Mail Delivery System <MAILER-DAEMON@mx.example.net>\n"
        f"To: {ME}\n"
        "Subject: Undelivered Mail Returned to Sender\n"
        f"Message-ID: <{report_id}>\n"
        f"Date: {format_datetime(utcnow())}\n"
        "MIME-Version: 1.0\n"
        'Content-Type: multipart/report; report-type=delivery-status; boundary="BB"\n'
        "\n"
        "--BB\n"
        "Content-Type: text/plain\n\n"
        "I'm sorry to have to inform you that your message could not be delivered.\n\n"
        "--BB\n"
        f"Content-Type: message/delivery-status; charset={charset}\n\n"
        f"{status}\n"
        "--BB\n"
        f"Content-Type: {returned}\n\n"
        f"From: Me <{ME}>\n"
        "To: bob@example.net, carol@example.net\n"
        "Subject: Hello\n"
        f"Message-ID: <{original}>\n\n"
        "--BB--\n"
    )
    return text.encode("utf-8", "surrogateescape").replace(b"\n", b"\r\n")


def qmail_bounce(original: str = ORIGINAL) -> bytes:
    """A non-standard bounce: prose naming the recipient, the message attached as rfc822."""
    inner = make_message(original, sender=f"Me <{ME}>", to="bob@example.net", subject="Hello")
    outer = (
        b"Return-Path: <>\r\n"
        b"From: MAILER-DAEMON@mail.example.net\r\n"
        b"To: " + ME.encode() + b"\r\n"
        b"Subject: failure notice\r\n"
        b"Message-ID: <qmail-1@mail.example.net>\r\n"
        b"MIME-Version: 1.0\r\n"
        b'Content-Type: multipart/mixed; boundary="QQ"\r\n\r\n'
        b"--QQ\r\nContent-Type: text/plain\r\n\r\n"
        b"Hi. This is the qmail-send program at mail.example.net.\r\n"
        b"I'm afraid I wasn't able to deliver your message to the following addresses.\r\n\r\n"
        b"<bob@example.net>:\r\nSorry, no mailbox here by that name. (#5.1.1)\r\n\r\n"
        b"--QQ\r\nContent-Type: message/rfc822\r\n\r\n" + inner + b"\r\n--QQ--\r\n"
    )
    return outer


def _hello() -> bytes:
    return make_message(
        ORIGINAL,
        subject="Hello",
        sender=f"Me <{ME}>",
        to="bob@example.net, carol@example.net",
    )


def test_a_standard_report_is_read_per_recipient() -> None:
    """Final-Recipient, Action, Status and the unfolded Diagnostic-Code of each recipient."""
    report = read_report(dsn())
    assert report is not None and report.standard
    assert ORIGINAL in report.message_ids
    bob, carol = report.recipients
    assert (bob.recipient, bob.action, bob.status) == ("bob@example.net", "failed", "5.1.1")
    assert bob.diagnostic.startswith("550 5.1.1 <bob@example.net>: Recipient address rejected")
    assert (carol.recipient, carol.action) == ("carol@example.net", "delayed")


def test_a_non_standard_bounce_is_read_from_its_returned_message() -> None:
    """A mailer-daemon's prose with the returned message: its Message-ID and the prose."""
    report = read_report(qmail_bounce())
    assert report is not None and not report.standard
    assert report.message_ids == (ORIGINAL,)
    assert "bob@example.net" in report.text


def test_a_forwarded_message_is_no_report() -> None:
    """A person forwarding mail as an attachment has not sent a bounce."""
    inner = make_message(ORIGINAL, sender=f"Me <{ME}>", to="bob@example.net")
    forwarded = (
        b"From: Alice <alice@example.net>\r\nTo: " + ME.encode() + b"\r\n"
        b"Subject: Fwd: Hello\r\nMessage-ID: <fwd-1@example.net>\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: multipart/mixed; boundary="FF"\r\n\r\n'
        b"--FF\r\nContent-Type: text/plain\r\n\r\nSee below.\r\n"
        b"--FF\r\nContent-Type: message/rfc822\r\n\r\n" + inner + b"\r\n--FF--\r\n"
    )
    assert read_report(forwarded) is None
    assert read_report(_hello()) is None


@pytest.mark.parametrize(
    "raw",
    [
        dsn(charset="x-no-such-charset"),
        dsn(status_part="Final-Recipient: rfc822; b\xffob@example.net\nAction: \xfe\xfe\n"),
        dsn(status_part="\n\n\n:::\n  continuation without field\nAction\n"),
        dsn().replace(b"--BB--", b""),  # no closing boundary
        dsn().replace(b'boundary="BB"', b"boundary="),  # no boundary at all
        dsn(status_part="Final-Recipient: rfc822; x@example.net\n" * 5000),
        b"Content-Type: multipart/report; report-type=delivery-status\r\n\r\n" + b"\x00" * 9000,
    ],
    ids=["charset", "bytes", "junk", "unclosed", "no-boundary", "many", "nul"],
)
def test_hostile_reports_are_read_without_raising(raw: bytes) -> None:
    """Malformed parts, unknown charsets, undecodable bytes: a report or None, never a crash."""
    report = read_report(raw)
    assert report is None or len(report.recipients) <= 1000


@given(st.binary(max_size=3000))
@hypothesis_settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_bytes_are_read_without_raising(junk: bytes) -> None:
    """Whatever follows a report's headers, reading it returns a report or None."""
    head = b'Content-Type: multipart/report; report-type=delivery-status; boundary="BB"\r\n\r\n'
    read_report(head + junk)
    read_report(junk)


def test_a_huge_report_is_read_from_its_beginning() -> None:
    """A report returning many megabytes of mail is read from its first bytes only."""
    raw = dsn(returned="message/rfc822")
    huge = raw.replace(b"\r\n\r\n--BB--", b"\r\n" + b"x" * (8 * 1024 * 1024) + b"\r\n\r\n--BB--")
    report = read_report(huge)
    assert report is not None and [r.action for r in report.recipients] == ["failed", "delayed"]


def _status(store: Store, submission_id: int) -> dict[str, dict[str, str]]:
    with store.session() as session:
        submission = session.get(Submission, submission_id)
        assert submission is not None
        return dict(submission.delivery_status or {})


def _submission_changes(store: Store, submission_id: int) -> int:
    with store.session() as session:
        return len(
            session.scalars(
                select(Change.seq).where(
                    Change.type == "EmailSubmission", Change.object_id == submission_id
                )
            ).all()
        )


def _bounces(store: Store) -> list[tuple[int, list[dict[str, str]]]]:
    with store.session() as session:
        return [(b.submission_id, b.recipients) for b in session.scalars(select(Bounce))]


def test_a_report_arriving_later_marks_its_recipients(
    store: Store, settings: Settings, sink: SmtpSink
) -> None:
    """Failed is delivered "no", delayed stays "queued"; smtpReply from the report; once."""
    account = local_sender(store, settings, sink)
    submission = send(store, settings, account[1], _hello())
    assert {v["delivered"] for v in _status(store, submission).values()} == {"queued"}
    before = _submission_changes(store, submission)
    stored = ingest(store, account, [("dsn", dsn())])
    recognise_bounces(store, stored.created_ids)
    status = _status(store, submission)
    assert status["bob@example.net"]["delivered"] == "no"
    assert status["bob@example.net"]["smtpReply"].startswith("550 5.1.1 <bob@example.net>")
    assert status["carol@example.net"]["delivered"] == "queued"
    assert status["carol@example.net"]["smtpReply"] == "451 4.4.1 try again later"
    ((bounced, recipients),) = _bounces(store)
    assert bounced == submission and [r["action"] for r in recipients] == ["failed", "delayed"]
    assert _submission_changes(store, submission) == before + 1
    recognise_bounces(store, stored.created_ids)  # seen again: nothing doubles
    assert len(_bounces(store)) == 1


def test_a_non_standard_bounce_fails_the_recipient_it_names(
    store: Store, settings: Settings, sink: SmtpSink
) -> None:
    """qmail's prose names bob: bob failed, carol untouched."""
    account = local_sender(store, settings, sink)
    submission = send(store, settings, account[1], _hello())
    stored = ingest(store, account, [("qmail", qmail_bounce())])
    recognise_bounces(store, stored.created_ids)
    status = _status(store, submission)
    assert status["bob@example.net"]["delivered"] == "no"
    assert "no mailbox here" in status["bob@example.net"]["smtpReply"]
    assert status["carol@example.net"]["delivered"] == "queued"


def test_hostile_reports_cost_only_themselves(
    store: Store, settings: Settings, sink: SmtpSink
) -> None:
    """Broken reports in the same batch leave the good one attached and nothing raised."""
    account = local_sender(store, settings, sink)
    submission = send(store, settings, account[1], _hello())
    broken = [
        ("b1", dsn(status_part="Final-Recipient: \xff\n", report_id="x1@mx")),
        ("b2", dsn(report_id="x2@mx").replace(b'boundary="BB"', b"boundary=")),
        ("b3", b"Content-Type: multipart/report\r\n\r\n" + b"\xff" * 5000),
    ]
    stored = ingest(store, account, [*broken, ("good", dsn())])
    recognise_bounces(store, stored.created_ids)
    assert _status(store, submission)["bob@example.net"]["delivered"] == "no"


def test_a_report_is_attached_only_to_its_own_users_submission(
    store: Store, settings: Settings, sink: SmtpSink
) -> None:
    """Another user's mail naming my Message-ID changes nothing of mine."""
    account = local_sender(store, settings, sink)
    submission = send(store, settings, account[1], _hello())
    stranger = make_account(store, owner="mallory", name="mallory")
    stored = ingest(store, stranger, [("dsn", dsn())])
    recognise_bounces(store, stored.created_ids)
    assert _bounces(store) == []
    assert _status(store, submission)["bob@example.net"]["delivered"] == "queued"


def test_the_runtime_reads_reports_among_newly_synced_mail(
    store: Store, settings: Settings, sink: SmtpSink
) -> None:
    """Through the ingest step: a committed batch's follow-up job attaches the report."""
    account = local_sender(store, settings, sink)
    submission = send(store, settings, account[1], _hello())
    runtime = Runtime(store, settings)
    try:
        item = IncomingMessage("dsn", dsn(), label_ids=[account[2]])
        commit_batch(store, account[1], account[0], [item])
        drain_follow_up(runtime.queues)
    finally:
        runtime.stop()
    assert _status(store, submission)["bob@example.net"]["delivered"] == "no"
