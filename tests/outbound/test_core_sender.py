"""The lane worker against a real SMTP sink with an injected clock: pace, retries, failures."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from mailroom.outbound import hooks
from mailroom.outbound.queueing import queue_message
from mailroom.outbound.sender import HANDOFF_TIMEOUT, Sender
from mailroom.store.changelog import changes_since
from mailroom.store.engine import Store
from mailroom.store.models import Submission
from tests.factories import make_message
from tests.outbound.core_support import (
    Clock,
    account_for,
    failed,
    queue,
    sending_settings,
    subjects,
    submission,
)
from tests.support.smtp_sink import SmtpSink


def _sender(store: Store, tmp_path: Path, clock: Clock, **values: str) -> Sender:
    return Sender(store, sending_settings(tmp_path, **values), clock=clock)


def test_calm_burst_leaves_at_the_configured_rate_and_none_fails(
    store: Store, sink: SmtpSink, clock: Clock, tmp_path: Path
) -> None:
    """500 calm mails: the burst at once, then 30 a minute, all delivered, no attempt spent."""
    settings = sending_settings(tmp_path, lane_rates="calm=30/5")
    account_id = account_for(store, sink)
    for number in range(500):
        queue(store, settings, account_id, number, clock)
    sender = Sender(store, settings, clock=clock)
    start, sent = clock(), 0
    while True:
        sent += sender.run_lane("calm")
        seconds = int((clock() - start).total_seconds())
        assert len(sink.messages) == sent <= 5 + seconds // 2  # never ahead of the bucket
        assert sent == min(500, 5 + seconds // 2)  # and never behind it
        if sent == 500:
            break
        clock.advance(10)
    assert clock() - start == timedelta(seconds=990)  # (500 - 5) / 30 a minute: 16.5 min
    assert subjects(sink) == [f"n{number}" for number in range(500)]  # oldest first
    assert failed(store) == []
    with store.session() as session:
        rows = session.execute(select(Submission.state, Submission.attempts)).all()
    assert {tuple(row) for row in rows} == {("sent", 0)}
    sender.close()


def test_urgent_overtakes_queued_calm_mail(
    store: Store, sink: SmtpSink, clock: Clock, tmp_path: Path
) -> None:
    """An urgent mail queued behind a calm backlog leaves before the backlog does."""
    settings = sending_settings(tmp_path, lane_rates="calm=6/1")
    account_id = account_for(store, sink)
    for number in range(20):
        queue(store, settings, account_id, number, clock, kind="newsletter")
    urgent = queue(store, settings, account_id, 99, clock, kind="password_reset")
    sender = Sender(store, settings, clock=clock)
    for lane in ("urgent", "calm"):  # the order a worker serving both runs them
        sender.run_lane(lane)
    clock.advance(10)
    assert sender.run_lane("calm") == 1
    assert sender.run_lane("urgent") == 0
    assert subjects(sink) == ["n99", "n0", "n1"]
    assert submission(store, urgent).lane == "urgent"
    assert sender.lane_pause["calm"] == pytest.approx(10.0)
    sender.close()


def test_direct_451_three_times_lands_in_the_failed_list_after_backoff(
    store: Store, sink: SmtpSink, clock: Clock, tmp_path: Path
) -> None:
    """Direct mail answered 451 three times: attempts 30 s and 2 min apart, then failed."""
    sink.script(["451 4.3.0 try again later"] * 3)
    sender = _sender(store, tmp_path, clock)
    submission_id = queue(store, sender.settings, account_for(store, sink), 1, clock, lane="direct")
    assert sender.run_lane("direct") == 1
    row = submission(store, submission_id)
    assert (row.state, row.attempts, row.last_code) == ("queued", 1, 451)
    assert row.next_attempt_at == clock() + timedelta(seconds=30)
    for wait, handed in ((29, 0), (1, 1), (119, 0), (1, 1)):
        clock.advance(wait)
        assert sender.run_lane("direct") == handed
    assert sink.attempts == 3 and sink.messages == []
    row = submission(store, submission_id)
    assert (row.state, row.attempts) == ("failed", 3)
    assert row.delivery_status == {
        "bob@example.net": {
            "smtpReply": "451 4.3.0 try again later",
            "delivered": "no",
            "displayed": "unknown",
        }
    }
    [entry] = failed(store)
    assert (entry.submission_id, entry.lane, entry.attempts, entry.code) == (
        submission_id,
        "direct",
        3,
        451,
    )
    assert "3 attempts" in entry.reason
    clock.advance(3600)
    assert sender.run_lane("direct") == 0
    sender.close()


def test_throttled_deferrals_are_not_attempts(
    store: Store, sink: SmtpSink, clock: Clock, tmp_path: Path
) -> None:
    """A calm mail deferred ten times by 451 is still sent: deferrals count, attempts do not."""
    sink.script(["451 4.7.0 greylisted"] * 10)
    sender = _sender(store, tmp_path, clock)
    submission_id = queue(store, sender.settings, account_for(store, sink), 1, clock)
    pauses = []
    while submission(store, submission_id).state != "sent":
        sender.run_lane("calm")
        row = submission(store, submission_id)
        if row.state == "queued":
            assert row.next_attempt_at is not None
            pauses.append(row.next_attempt_at - clock())
            clock.now = row.next_attempt_at
    row = submission(store, submission_id)
    assert (row.attempts, row.deferrals, len(sink.messages)) == (0, 10, 1)
    assert pauses[:3] == [timedelta(minutes=1), timedelta(minutes=2), timedelta(minutes=4)]
    assert max(pauses) == timedelta(minutes=30)
    assert row.delivery_status is not None
    assert row.delivery_status["bob@example.net"]["smtpReply"].startswith("250")
    sender.close()


def test_throttled_mail_fails_after_six_hours(
    store: Store, sink: SmtpSink, clock: Clock, tmp_path: Path
) -> None:
    """A calm mail deferred without end fails 6 hours after it was queued, with the last reply."""
    sink.script(["451 4.3.0 mailbox busy"] * 1000)
    sender = _sender(store, tmp_path, clock)
    start = clock()
    submission_id = queue(store, sender.settings, account_for(store, sink), 1, clock)
    while submission(store, submission_id).state == "queued":
        sender.run_lane("calm")
        due = submission(store, submission_id).next_attempt_at
        if due is not None:
            clock.now = due
    row = submission(store, submission_id)
    assert row.state == "failed" and row.attempts == 0
    assert clock() - start == timedelta(hours=6)
    [entry] = failed(store)
    assert "6 hours" in entry.reason and "mailbox busy" in entry.reason
    sender.close()


@pytest.mark.parametrize("lane", ["urgent", "calm", "direct"])
def test_550_fails_at_once_on_every_lane(
    store: Store, sink: SmtpSink, clock: Clock, tmp_path: Path, lane: str
) -> None:
    """A permanent refusal fails the submission at its first hand-off, whatever the lane."""
    sink.script(["550 5.7.1 relaying denied"])
    sender = _sender(store, tmp_path, clock)
    submission_id = queue(store, sender.settings, account_for(store, sink), 1, clock, lane=lane)
    assert sender.run_lane(lane) == 1
    row = submission(store, submission_id)
    assert (row.state, row.attempts, row.last_code) == ("failed", 0, 550)
    [entry] = failed(store)
    assert entry.code == 550 and "relaying denied" in entry.reason
    assert sink.attempts == 1
    sender.close()


def test_pacing_off_makes_every_lane_count_attempts(
    store: Store, sink: SmtpSink, clock: Clock, tmp_path: Path
) -> None:
    """With pacing off a calm lane is not throttled and fails after 3 attempts like direct."""
    sender = _sender(store, tmp_path, clock, lane_rates="calm=1/1", pacing="off")
    account_id = account_for(store, sink)
    for number in range(10):
        queue(store, sender.settings, account_id, number, clock)
    assert sender.run_lane("calm") == 10  # no bucket
    sink.script(["421 4.4.2 closing"] * 3)
    submission_id = queue(store, sender.settings, account_id, 10, clock)
    for _ in range(3):
        sender.run_lane("calm")
        clock.advance(300)
    assert (submission(store, submission_id).state, len(failed(store))) == ("failed", 1)
    sender.close()


def test_partly_refused_recipients_show_in_the_delivery_status(
    store: Store, sink: SmtpSink, clock: Clock, tmp_path: Path
) -> None:
    """A recipient refused while others are accepted is marked not delivered; the mail is sent."""
    sink.refuse({"carol@example.net": "550 5.1.1 no such user"})
    sender = _sender(store, tmp_path, clock)
    account_id = account_for(store, sink)
    with store.session() as session:
        raw = make_message("p@core.test", to="bob@example.net, carol@example.net")
        submission_id = queue_message(
            session, settings=sender.settings, account_id=account_id, raw=raw, now=clock()
        ).id
    sender.run_lane("calm")
    row = submission(store, submission_id)
    assert row.state == "sent" and row.delivery_status is not None
    assert row.delivery_status["bob@example.net"]["delivered"] == "queued"
    assert row.delivery_status["carol@example.net"] == {
        "smtpReply": "550 5.1.1 no such user",
        "delivered": "no",
        "displayed": "unknown",
    }
    sender.close()


def test_refused_login_and_missing_server_fail_with_the_reason(
    store: Store, clock: Clock, tmp_path: Path
) -> None:
    """A server wanting a login, or an account without an outgoing server, fails the mail."""
    sender = _sender(store, tmp_path, clock)
    with SmtpSink(login="alice", password="pw") as guarded:
        first = queue(store, sender.settings, account_for(store, guarded), 1, clock, lane="direct")
        second = queue(
            store, sender.settings, account_for(store, None, "bare"), 2, clock, lane="direct"
        )
        assert sender.run_lane("direct") == 2
    reasons = {entry.submission_id: entry.reason for entry in failed(store)}
    assert "login" in reasons[first]
    assert "mailroom account update" in reasons[second]
    assert submission(store, first).attempts == 0
    sender.close()


def test_every_state_change_is_an_emailsubmission_change(
    store: Store, sink: SmtpSink, clock: Clock, tmp_path: Path
) -> None:
    """Queued, claimed and sent each write a change row the JMAP client reads."""
    sender = _sender(store, tmp_path, clock)
    submission_id = queue(store, sender.settings, account_for(store, sink), 1, clock)
    with store.session() as session:
        user_id = submission(store, submission_id).user_id
        after_queue = changes_since(session, user_id, "EmailSubmission", 0).new_state
    sender.run_lane("calm")
    with store.session() as session:
        changes = changes_since(session, user_id, "EmailSubmission", after_queue)
    assert changes.updated == [submission_id]
    assert changes.new_state - after_queue == 2  # sending, then sent
    sender.close()


def test_after_sent_hooks_run_once_and_their_failure_is_logged(
    store: Store, sink: SmtpSink, clock: Clock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Every AFTER_SENT hook gets the sent submission's id; a failing one does not stop the lane."""
    seen: list[int] = []

    def broken(_store: Store, _submission_id: int) -> None:
        raise RuntimeError("filing failed")

    def record(_store: Store, submission_id: int) -> None:
        seen.append(submission_id)

    hooks.AFTER_SENT.extend([broken, record])
    try:
        sender = _sender(store, tmp_path, clock)
        account_id = account_for(store, sink)
        ids = [queue(store, sender.settings, account_id, n, clock) for n in range(2)]
        assert sender.run_lane("calm") == 2
    finally:
        hooks.AFTER_SENT.remove(broken)
        hooks.AFTER_SENT.remove(record)
    assert seen == ids
    assert "After-sent hook broken failed" in caplog.text
    sender.close()


def test_a_submission_left_sending_is_not_sent_again(
    store: Store, sink: SmtpSink, clock: Clock, tmp_path: Path
) -> None:
    """A hand-off nobody finished goes to the failed list as possibly delivered, never resent."""
    sender = _sender(store, tmp_path, clock)
    submission_id = queue(store, sender.settings, account_for(store, sink), 1, clock)
    with store.session() as session:
        row = session.get(Submission, submission_id)
        assert row is not None
        row.state, row.handoff_at = "sending", clock()
    assert sender.next_due("calm") == clock() + HANDOFF_TIMEOUT
    clock.advance(HANDOFF_TIMEOUT.total_seconds() - 1)
    assert sender.run_lane("calm") == 0
    assert submission(store, submission_id).state == "sending"  # maybe still in hand
    clock.advance(1)
    assert sender.lanes_with_work() == ["calm"]
    assert sender.run_lane("calm") == 0
    assert sink.messages == []
    row = submission(store, submission_id)
    assert row.state == "failed"
    assert row.delivery_status == {
        "bob@example.net": {
            "smtpReply": "451 4.4.0 hand-off",
            "delivered": "unknown",
            "displayed": "unknown",
        }
    }
    [entry] = failed(store)
    assert "may have accepted it" in entry.reason and f"retry {submission_id}" in entry.reason
    sender.close()


def test_two_workers_on_one_lane_hand_over_each_mail_once(
    store: Store, sink: SmtpSink, clock: Clock, tmp_path: Path
) -> None:
    """Workers racing over the same lane never hand the same submission over twice."""
    settings = sending_settings(tmp_path)
    account_id = account_for(store, sink)
    for number in range(30):
        queue(store, settings, account_id, number, clock, lane="direct")
    senders = [Sender(store, settings, clock=clock) for _ in range(3)]
    counts: list[int] = []
    threads = [
        threading.Thread(target=lambda s=s: counts.append(s.run_lane("direct"))) for s in senders
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(counts) == 30
    assert sorted(subjects(sink)) == sorted(f"n{number}" for number in range(30))
    for sender in senders:
        sender.close()
