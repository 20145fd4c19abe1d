"""What the operator sees of sending: the failed-sends list and the figures per lane.

``failed_sends`` holds every submission that gave up (SPEC §11: attempts spent
on an unthrottled lane, the 6-hour window closed on a throttled one, a
permanent refusal, a refused login, an unknown hand-off), newest first here;
``mailroom outbound retry ID`` (:func:`mailroom.outbound.queueing.retry_submission`)
takes one off the list. The figures count submissions by state per lane:
``queued`` is everything waiting (scheduled ones included), ``deferred`` the part
of it that was put back after a temporary failure.

A sealed submission's Message-ID, envelope and reason
(:mod:`mailroom.outbound.sealed_queue`) are opened for the list; a bare file
reader (no keys) meeting one raises
:class:`~mailroom.errors.SealedWithoutKeys`, and the command reads again
through a session of the store, which has them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mailroom.outbound.lanes import LANES, WAITING
from mailroom.store.reader import Reader, as_reader, json_value, required_stamp

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

__all__ = ["STAT_COLUMNS", "FailedEntry", "failed_list", "lane_stats"]

STAT_COLUMNS = ("queued", "deferred", "sending", "sent", "failed")


@dataclass(frozen=True)
class FailedEntry:
    """One row of the failed-sends list, with what identifies the message."""

    submission_id: int
    lane: str
    account: str
    message_id: str
    recipients: list[str]
    attempts: int
    code: int | None
    reason: str
    failed_at: datetime

    def as_json(self) -> dict[str, Any]:
        """The entry as a JSON object (times in ISO 8601)."""
        return {
            "id": self.submission_id,
            "lane": self.lane,
            "account": self.account,
            "messageId": self.message_id,
            "recipients": self.recipients,
            "attempts": self.attempts,
            "code": self.code,
            "reason": self.reason,
            "failedAt": self.failed_at.isoformat(),
        }


def failed_list(source: Reader | Session, *, limit: int | None = None) -> list[FailedEntry]:
    """The failed sends, newest first (at most ``limit``).

    Plain SQL through a :class:`~mailroom.store.reader.Reader` (or the same SQL in a
    session), so ``mailroom outbound failed`` starts without SQLAlchemy.
    """
    sql = (
        "SELECT failed_sends.submission_id, failed_sends.lane, accounts.name, "
        "submissions.message_id, submissions.envelope, failed_sends.attempts, "
        "failed_sends.code, failed_sends.reason, failed_sends.failed_at, failed_sends.id, "
        "submissions.user_id, submissions.sealed FROM failed_sends "
        "JOIN submissions ON submissions.id = failed_sends.submission_id "
        "JOIN accounts ON accounts.id = submissions.account_id "
        "ORDER BY failed_sends.failed_at DESC, failed_sends.id DESC"
    )
    params: dict[str, Any] = {}
    if limit is not None:
        sql += " LIMIT :limit"
        params["limit"] = limit
    entries = []
    for row in as_reader(source).rows(sql, params):
        submission, lane, account, message_id, envelope, attempts, code, reason, failed = row[:9]
        if row[11]:
            message_id, envelope, reason = _opened(source, row)
        envelope = json_value(envelope) or {}
        entries.append(
            FailedEntry(
                submission_id=submission,
                lane=lane,
                account=account,
                message_id=message_id,
                recipients=[str(item["email"]) for item in envelope.get("rcptTo", [])],
                attempts=attempts,
                code=code,
                reason=reason,
                failed_at=required_stamp(failed),
            )
        )
    return entries


def _opened(source: Reader | Session, row: Sequence[Any]) -> tuple[str, Any, str]:
    """The Message-ID, envelope and reason of a sealed submission's row, opened.

    Loaded only for a sealed row (the command starts without SQLAlchemy); a bare file
    reader has no keys and raises SealedWithoutKeys.
    """
    from mailroom.crypto.mail_reading import session_of
    from mailroom.outbound.sealed_queue import FAILED_SENDS, SUBMISSIONS, read_value

    session, owner, submission, failed_id = session_of(source), int(row[10]), row[0], row[9]
    return (
        read_value(session, owner, SUBMISSIONS, "message_id", submission, row[3], True),
        read_value(session, owner, SUBMISSIONS, "envelope", submission, row[4], True),
        read_value(session, owner, FAILED_SENDS, "reason", failed_id, row[7], True),
    )


def lane_stats(source: Reader | Session) -> dict[str, dict[str, int]]:
    """Per lane: how many submissions are queued, deferred, sending, sent and failed.

    Plain SQL, as :func:`failed_list`: ``mailroom outbound stats`` starts without SQLAlchemy.
    """
    stats = {lane: dict.fromkeys(STAT_COLUMNS, 0) for lane in LANES}
    rows = as_reader(source).rows(
        "SELECT lane, state, count(*), "
        "sum(CASE WHEN deferrals > 0 OR attempts > 0 THEN 1 ELSE 0 END) "
        "FROM submissions GROUP BY lane, state"
    )
    for lane, state, count, put_back in rows:
        figures = stats.setdefault(lane, dict.fromkeys(STAT_COLUMNS, 0))
        if state in WAITING:
            figures["queued"] += count
            figures["deferred"] += int(put_back or 0)
        elif state in figures:
            figures[state] += count
    return stats
