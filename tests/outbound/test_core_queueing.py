"""Queueing a message into its lane, idempotent per Message-ID; cancelling and retrying it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from mailroom.config import Settings
from mailroom.outbound import hooks
from mailroom.outbound.queueing import (
    OutboundError,
    cancel_submission,
    queue_message,
    retry_submission,
)
from mailroom.store.changelog import changes_since
from mailroom.store.engine import Store
from mailroom.store.models import Blob, FailedSend, Submission
from tests.factories import BASE_TIME, make_message
from tests.helpers import make_account


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings with an invoice kind sent urgent."""
    return Settings(data_dir=tmp_path, lane_kinds="invoice=urgent,relay=direct")


@pytest.fixture
def woken() -> Iterator[list[dict[str, datetime]]]:
    """The lanes the after-commit waker was told about, one dict per commit."""
    calls: list[dict[str, datetime]] = []

    def waker(lanes: Mapping[str, datetime]) -> None:
        calls.append(dict(lanes))

    hooks.WAKERS.append(waker)
    yield calls
    hooks.WAKERS.remove(waker)


def _queue(store: Store, settings: Settings, raw: bytes, **kwargs: object) -> Submission:
    _, account_id, _ = make_account(store)
    with store.session() as session:
        return queue_message(
            session,
            settings=settings,
            account_id=account_id,
            raw=raw,
            now=BASE_TIME,
            **kwargs,  # type: ignore[arg-type]
        )


def test_queued_message_is_stored_without_bcc_in_its_lane(
    store: Store, settings: Settings, woken: list[dict[str, datetime]]
) -> None:
    """The submission keeps the bytes without Bcc, the envelope with Bcc, the kind's lane."""
    raw = make_message("m1@example.org", headers={"Bcc": "hidden@example.net"})
    submission = _queue(store, settings, raw, kind="invoice")
    with store.session() as session:
        row = session.get(Submission, submission.id)
        assert row is not None
        data = session.scalar(select(Blob.data).where(Blob.sha256 == row.raw_sha256))
        assert (
            data is not None and b"hidden@" not in data and b"Message-ID: <m1@example.org>" in data
        )
        assert [r["email"] for r in row.envelope["rcptTo"]] == [
            "bob@example.net",
            "hidden@example.net",
        ]
        assert (row.lane, row.state, row.message_id, row.attempts) == (
            "urgent",
            "queued",
            "m1@example.org",
            0,
        )
        assert row.next_attempt_at == BASE_TIME
        changes = changes_since(session, row.user_id, "EmailSubmission", 0)
        assert changes.created == [row.id]
    assert woken == [{"urgent": BASE_TIME}]


def test_unknown_kind_goes_calm_and_a_given_lane_wins(store: Store, settings: Settings) -> None:
    """An unknown kind is sent calm; an explicit lane is used as given."""
    assert _queue(store, settings, make_message("a@x"), kind="report").lane == "calm"
    assert _queue(store, settings, make_message("b@x"), lane="direct").lane == "direct"
    with pytest.raises(OutboundError, match="no lane called 'fast'"):
        _queue(store, settings, make_message("c@x"), lane="fast")


def test_same_message_id_twice_is_one_submission(
    store: Store, settings: Settings, woken: list[dict[str, datetime]]
) -> None:
    """Queueing the same Message-ID again for the account returns the first submission."""
    first = _queue(store, settings, make_message("same@x"))
    again = _queue(store, settings, make_message("same@x", subject="Other"))
    assert again.id == first.id
    with store.session() as session:
        assert len(session.scalars(select(Submission)).all()) == 1
    assert len(woken) == 1


def test_send_at_in_the_future_is_scheduled(store: Store, settings: Settings) -> None:
    """A later sendAt makes the submission scheduled and due at that moment."""
    later = BASE_TIME + timedelta(minutes=10)
    submission = _queue(store, settings, make_message("s@x"), send_at=later)
    assert (submission.state, submission.next_attempt_at) == ("scheduled", later)
    past = _queue(store, settings, make_message("p@x"), send_at=BASE_TIME - timedelta(hours=1))
    assert (past.state, past.next_attempt_at) == ("queued", BASE_TIME)


def test_a_message_without_message_id_is_refused(store: Store, settings: Settings) -> None:
    """No Message-ID, no submission: one plain sentence."""
    with pytest.raises(OutboundError, match="no Message-ID"):
        _queue(store, settings, b"From: a@example.org\r\nTo: b@example.net\r\n\r\nhi\r\n")


def test_rollback_wakes_nobody(
    store: Store, settings: Settings, woken: list[dict[str, datetime]]
) -> None:
    """A transaction that queued and then rolled back enqueues no job."""
    _, account_id, _ = make_account(store)
    with pytest.raises(RuntimeError), store.session() as session:
        queue_message(session, settings=settings, account_id=account_id, raw=make_message("r@x"))
        raise RuntimeError("the caller failed")
    assert woken == []
    with store.session() as session:
        assert session.scalars(select(Submission)).all() == []


def test_cancel_only_while_waiting(store: Store, settings: Settings) -> None:
    """Scheduled or queued submissions cancel (with a change row); a claimed one does not."""
    submission = _queue(
        store, settings, make_message("c@x"), send_at=BASE_TIME + timedelta(hours=1)
    )
    claimed = _queue(store, settings, make_message("d@x"))
    with store.session() as session:
        row = session.get(Submission, submission.id)
        other = session.get(Submission, claimed.id)
        assert row is not None and other is not None
        other.state = "sending"
        session.flush()
        assert cancel_submission(session, row) is True
        assert row.state == "canceled"
        assert cancel_submission(session, row) is False
        assert cancel_submission(session, other) is False
        assert other.state == "sending"
        changes = changes_since(session, row.user_id, "EmailSubmission", 0)
        assert sorted(changes.created) == sorted([row.id, other.id])


def test_retry_requeues_a_failed_submission_afresh(
    store: Store, settings: Settings, woken: list[dict[str, datetime]]
) -> None:
    """Retrying a failed submission drops its failed row and starts window and attempts anew."""
    submission = _queue(store, settings, make_message("f@x"), lane="direct")
    later = BASE_TIME + timedelta(hours=7)
    with store.session() as session:
        row = session.get(Submission, submission.id)
        assert row is not None
        row.state, row.attempts = "failed", 3
        session.add(FailedSend(submission_id=row.id, lane="direct", attempts=3, reason="451"))
    with store.session() as session:
        assert retry_submission(session, submission.id, now=later) == "direct"
    with store.session() as session:
        row = session.get(Submission, submission.id)
        assert row is not None
        assert (row.state, row.attempts, row.queued_at, row.next_attempt_at) == (
            "queued",
            0,
            later,
            later,
        )
        assert session.scalars(select(FailedSend)).all() == []
        with pytest.raises(Exception, match="no failed submission"):
            retry_submission(session, submission.id)
    assert woken[-1] == {"direct": later}
