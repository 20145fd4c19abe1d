"""EmailSubmission objects (RFC 8621 §7) read from ``submissions`` rows.

=================== =======================================================
property            from
=================== =======================================================
``id``              ``S`` + the row id
``identityId``      the identity it was sent with (null once that is deleted)
``emailId``         the stored message it sends (null once that is deleted)
``threadId``        that message's thread
``envelope``        as given at creation, or as derived from the headers
``sendAt``          when the lane may take it: creation plus the undo window,
                    or the FUTURERELEASE time
``undoStatus``      ``scheduled``/``queued``: ``pending``; ``sending``,
                    ``sent``, ``failed``: ``final``; ``canceled``
``deliveryStatus``  per rcptTo address, from the SMTP replies the lane kept
                    (``delivery_status``) and the bounces filed since; null
                    before the first attempt
``dsnBlobIds``      the raw blobs of the delivery status notifications
                    (``bounces``) that reported on it
``mdnBlobIds``      always empty: read receipts are not matched to submissions
=================== =======================================================

Rows are never deleted for JMAP, so an id is never handed out twice (SQLite
gives a deleted newest row's id to the next one) and the operator's figures
stay whole. A destroyed submission is *forgotten*: its ``message_key`` (the
Message-ID key that makes queueing idempotent) becomes ``forgotten:<id>``
(:func:`forget`), and every JMAP read leaves such rows out. A canceled
submission whose message is submitted again keeps its record but gives up
its key the same way, as ``replaced:<id>`` (:func:`free_message_key`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from mailroom.jmap import ids
from mailroom.jmap.methods.common import utc_date
from mailroom.store.models import Bounce, Message, Submission

__all__ = [
    "PROPERTIES",
    "UNDO_STATES",
    "forget",
    "free_message_key",
    "owned_submissions",
    "submission_object",
    "submission_rows",
    "undo_status",
]

PROPERTIES = (
    "id",
    "identityId",
    "emailId",
    "threadId",
    "envelope",
    "sendAt",
    "undoStatus",
    "deliveryStatus",
    "dsnBlobIds",
    "mdnBlobIds",
)
# The submission states behind each undoStatus.
UNDO_STATES = {
    "pending": ("scheduled", "queued"),
    "final": ("sending", "sent", "failed"),
    "canceled": ("canceled",),
}
_UNDO = {state: status for status, states in UNDO_STATES.items() for state in states}
_DELIVERED = frozenset({"queued", "yes", "no", "unknown"})
_DISPLAYED = frozenset({"unknown", "yes"})
_FORGOTTEN = "forgotten:"


def undo_status(state: str) -> str:
    """The undoStatus of a submission state."""
    return _UNDO.get(state, "final")


def owned_submissions(user_id: int, *columns: Any) -> Select[Any]:
    """``columns`` (the row and its message's thread) of the user's submissions."""
    return (
        select(*(columns or (Submission, Message.thread_id)))
        .select_from(Submission)
        .outerjoin(Message, Message.id == Submission.email_id)
        .where(Submission.user_id == user_id, ~Submission.message_key.startswith(_FORGOTTEN))
    )


def forget(row: Submission) -> None:
    """Leave the submission out of JMAP from now on (destroyed), keeping the row."""
    row.message_key = f"{_FORGOTTEN}{row.id}"


def free_message_key(row: Submission) -> None:
    """Let the row's Message-ID be queued again (the row stays as it is otherwise)."""
    row.message_key = f"replaced:{row.id}"


def submission_rows(
    session: Session, user_id: int, wanted: Iterable[int] | None
) -> list[tuple[Submission, int | None, list[int]]]:
    """(row, thread id, bounce message ids) of the user's submissions (all, or ``wanted``)."""
    query = owned_submissions(user_id).order_by(Submission.id)
    if wanted is not None:
        query = query.where(Submission.id.in_(list(wanted)))
    rows = [(row, thread) for row, thread in session.execute(query)]
    bounces: dict[int, list[int]] = defaultdict(list)
    if rows:
        for submission, message in session.execute(
            select(Bounce.submission_id, Bounce.message_id)
            .where(Bounce.submission_id.in_([row.id for row, _ in rows]))
            .order_by(Bounce.id)
        ):
            bounces[submission].append(message)
    return [(row, thread, bounces[row.id]) for row, thread in rows]


def _reported(entry: object) -> dict[str, str] | None:
    """A kept DeliveryStatus in RFC 8621's shape, or None when it is not one."""
    if not isinstance(entry, dict):
        return None
    delivered = entry.get("delivered")
    displayed = entry.get("displayed")
    return {
        "smtpReply": str(entry.get("smtpReply") or ""),
        "delivered": delivered if delivered in _DELIVERED else "unknown",
        "displayed": displayed if displayed in _DISPLAYED else "unknown",
    }


def _unreported(row: Submission) -> dict[str, str]:
    """The status of a recipient the lane kept nothing for."""
    if row.state == "failed":
        reply = f"{row.last_code or ''} {row.last_error or ''}".strip()
        return {"smtpReply": reply, "delivered": "no", "displayed": "unknown"}
    if row.state in ("scheduled", "queued", "sending"):
        return {"smtpReply": "", "delivered": "queued", "displayed": "unknown"}
    if row.state == "canceled":
        return {"smtpReply": "", "delivered": "no", "displayed": "unknown"}
    return {"smtpReply": "", "delivered": "unknown", "displayed": "unknown"}


def delivery_status(row: Submission) -> dict[str, dict[str, str]] | None:
    """``deliveryStatus``: one DeliveryStatus per rcptTo address; null before any attempt."""
    kept = row.delivery_status or {}
    if not kept and row.state != "failed":
        return None
    folded = {str(key).lower(): value for key, value in kept.items()}
    status: dict[str, dict[str, str]] = {}
    for recipient in (row.envelope or {}).get("rcptTo") or []:
        email = str(recipient.get("email", ""))
        entry = _reported(kept.get(email, folded.get(email.lower())))
        status[email] = entry or _unreported(row)
    return status


def submission_object(row: Submission, thread: int | None, bounces: list[int]) -> dict[str, Any]:
    """The whole EmailSubmission object of a row."""
    email = row.email_id
    return {
        "id": ids.submission_id(row.id),
        "identityId": ids.identity_id(row.identity_id) if row.identity_id is not None else None,
        "emailId": ids.email_id(email) if email is not None else None,
        "threadId": ids.thread_id(thread, email) if email is not None else None,
        "envelope": row.envelope,
        "sendAt": utc_date(row.send_at),
        "undoStatus": undo_status(row.state),
        "deliveryStatus": delivery_status(row),
        "dsnBlobIds": [ids.raw_blob_id(message) for message in bounces],
        "mdnBlobIds": [],
    }
