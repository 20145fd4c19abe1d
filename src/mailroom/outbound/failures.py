"""What the operator sees of sending: the failed-sends list and the figures per lane.

``failed_sends`` holds every submission that gave up (SPEC §11: attempts spent
on an unthrottled lane, the 6-hour window closed on a throttled one, a
permanent refusal, a refused login, an unknown hand-off), newest first here;
``mailroom outbound retry ID`` (:func:`mailroom.outbound.queueing.retry_submission`)
takes one off the list. The figures count submissions by state per lane:
``queued`` is everything waiting (scheduled ones included), ``deferred`` the part
of it that was put back after a temporary failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import case, func, or_, select
from sqlalchemy.orm import Session

from mailroom.outbound.lanes import LANES
from mailroom.outbound.queueing import WAITING
from mailroom.store.models import Account, FailedSend, Submission

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


def failed_list(session: Session, *, limit: int | None = None) -> list[FailedEntry]:
    """The failed sends, newest first (at most ``limit``)."""
    query = (
        select(FailedSend, Submission.message_id, Submission.envelope, Account.name)
        .join(Submission, Submission.id == FailedSend.submission_id)
        .join(Account, Account.id == Submission.account_id)
        .order_by(FailedSend.failed_at.desc(), FailedSend.id.desc())
        .limit(limit)
    )
    return [
        FailedEntry(
            submission_id=row.submission_id,
            lane=row.lane,
            account=account,
            message_id=message_id,
            recipients=[str(item["email"]) for item in (envelope or {}).get("rcptTo", [])],
            attempts=row.attempts,
            code=row.code,
            reason=row.reason,
            failed_at=row.failed_at,
        )
        for row, message_id, envelope, account in session.execute(query)
    ]


def lane_stats(session: Session) -> dict[str, dict[str, int]]:
    """Per lane: how many submissions are queued, deferred, sending, sent and failed."""
    stats = {lane: dict.fromkeys(STAT_COLUMNS, 0) for lane in LANES}
    put_back = or_(Submission.deferrals > 0, Submission.attempts > 0)
    rows = session.execute(
        select(
            Submission.lane,
            Submission.state,
            func.count(),
            func.sum(case((put_back, 1), else_=0)),
        ).group_by(Submission.lane, Submission.state)
    )
    for lane, state, count, deferred in rows:
        figures = stats.setdefault(lane, dict.fromkeys(STAT_COLUMNS, 0))
        if state in WAITING:
            figures["queued"] += count
            figures["deferred"] += int(deferred or 0)
        elif state in figures:
            figures[state] += count
    return stats
