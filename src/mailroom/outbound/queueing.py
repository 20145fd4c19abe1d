"""Putting a message into its lane, taking it out again, and re-queueing a failed one.

Every way of sending — a JMAP EmailSubmission, the submission port,
``mailroom send`` — enters through :func:`queue_message`, inside the caller's
transaction:

* the message needs a Message-ID (it is the idempotency key: queueing the same
  Message-ID again for one account returns the submission already there,
  found by every form its key may be stored in, :func:`find_submission`);
* while new mail is sealed, the row is inserted with placeholders and its
  Message-ID and envelope written sealed by id (:mod:`mailroom.outbound.sealed_queue`);
* ``Bcc``/``Resent-Bcc`` are removed from the transmitted bytes, which are kept
  in ``blobs`` (content-addressed, like raw messages);
* the lane is fixed now, from ``lane`` or ``kind`` (:func:`~mailroom.outbound.lanes.lane_for`),
  and never looked up again (SPEC §11);
* state ``scheduled`` when ``send_at`` is later than now, else ``queued``;
  ``next_attempt_at`` is when it is due;
* the EmailSubmission ``created`` change is written in the same transaction,
  and the lane's job is woken after the commit (:mod:`mailroom.outbound.hooks`).

:func:`cancel_submission` cancels only what no worker has claimed yet (a
single guarded UPDATE, so a worker claiming it at the same moment wins or
loses cleanly). :func:`retry_submission` is the operator's ``mailroom
outbound retry``: a failed submission starts afresh (attempts, deferrals and
its 6-hour window), and its failed-sends row goes.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session, make_transient_to_detached

from mailroom.config import Settings
from mailroom.crypto.mail_writing import seal_blob_data, sealed_blob_key
from mailroom.crypto.sealing import sealing_cipher
from mailroom.errors import ConfigError, NotFoundError
from mailroom.outbound.envelope import (
    OutboundError,
    check_envelope,
    envelope_from_headers,
    message_id_of,
    strip_bcc,
)
from mailroom.outbound.hooks import wake_after_commit
from mailroom.outbound.lanes import LANES, WAITING, lane_for
from mailroom.outbound.sealed_queue import PLACEHOLDERS, key_forms, stored_key, write_sealed
from mailroom.store.bulk import insert_ignoring_conflicts
from mailroom.store.changelog import record
from mailroom.store.models import Account, Blob, FailedSend, Submission, utcnow

__all__ = [
    "CHANGE_TYPE",
    "WAITING",
    "OutboundError",
    "cancel_submission",
    "find_submission",
    "queue_message",
    "record_submission_change",
    "retry_submission",
]

CHANGE_TYPE = "EmailSubmission"


def record_submission_change(
    session: Session, user_id: int, submission_ids: list[int], kind: str = "updated"
) -> None:
    """Write the EmailSubmission change rows (JMAP clients see the progress)."""
    record(session, user_id, CHANGE_TYPE, submission_ids, kind)


def _keep_bytes(session: Session, user_id: int, data: bytes) -> str:
    """Store the bytes to send (sealed under the sender's key when new mail is sealed); the key."""
    sha256 = hashlib.sha256(data).hexdigest()
    row = {"sha256": sha256, "size": len(data), "data": data, "created_at": utcnow()}
    cipher = sealing_cipher(session)
    if cipher is not None:
        key = sealed_blob_key(cipher, user_id, sha256)
        sealed = seal_blob_data(cipher, user_id, key, data)
        row.update(sha256=key, data=sealed, user_id=user_id)
    insert_ignoring_conflicts(session, Blob, [row], conflict=["sha256"])
    return str(row["sha256"])


def _lane(settings: Settings, kind: str | None, lane: str | None) -> str:
    if lane is None:
        try:
            return lane_for(kind, settings.lane_kind_map)
        except ConfigError as error:  # the operator's map is wrong: say so to the sender too
            raise OutboundError(str(error)) from None
    if lane not in LANES:
        raise OutboundError(f"There is no lane called {lane!r}; the lanes are {', '.join(LANES)}.")
    return lane


def find_submission(
    session: Session, account_id: int, owner: int, message_id: str
) -> Submission | None:
    """The account's submission of ``message_id`` (the Message-ID without <>), or None.

    Its key may be the clear id (queued while mail was clear) or the owner's hash of it
    under any stored key version (during an owner key rotation, rows carry the old one).
    """
    forms = key_forms(session, owner, [message_id])
    return session.scalar(
        select(Submission)
        .where(Submission.account_id == account_id, Submission.message_key.in_(forms))
        .order_by(Submission.id)
        .limit(1)
    )


def queue_message(
    session: Session,
    *,
    settings: Settings,
    account_id: int,
    raw: bytes,
    envelope: dict[str, Any] | None = None,
    kind: str | None = None,
    lane: str | None = None,
    identity_id: int | None = None,
    email_id: int | None = None,
    send_at: datetime | None = None,
    now: datetime | None = None,
) -> Submission:
    """Queue ``raw`` for sending from ``account_id`` (see the module docstring); the submission.

    Raises :class:`OutboundError` (one plain sentence) for a message or envelope
    that cannot be sent, :class:`~mailroom.errors.NotFoundError` for an unknown account.
    """
    moment = now or utcnow()
    user_id = session.scalar(select(Account.user_id).where(Account.id == account_id))
    if user_id is None:
        raise NotFoundError(f"There is no account with id {account_id}.")
    message_id = message_id_of(raw)
    found = find_submission(session, account_id, user_id, message_id)
    if found is not None:
        return found
    chosen = _lane(settings, kind, lane)
    checked = check_envelope(envelope) if envelope is not None else envelope_from_headers(raw)
    due = max(send_at, moment) if send_at is not None else moment
    values: dict[str, Any] = {
        "user_id": user_id,
        "account_id": account_id,
        "identity_id": identity_id,
        "email_id": email_id,
        "message_id": message_id,
        "message_key": stored_key(session, user_id, message_id),
        "raw_sha256": _keep_bytes(session, user_id, strip_bcc(raw)),
        "envelope": dict(checked),
        "lane": chosen,
        "kind": kind,
        "state": "scheduled" if due > moment else "queued",
        "queued_at": moment,
        "send_at": due,
        "next_attempt_at": due,
        "attempts": 0,
        "deferrals": 0,
        "handoff_at": None,
        "sent_at": None,
        "last_code": None,
        "last_error": None,
        "delivery_status": None,
        "updated_at": moment,
        "sealed": sealing_cipher(session) is not None,
    }
    row = {**values, **PLACEHOLDERS} if values["sealed"] else values
    created = insert_ignoring_conflicts(
        session, Submission, [row], conflict=["account_id", "message_key"], returning=["id"]
    )
    if not created:  # queued at the same moment by another transaction
        found = find_submission(session, account_id, user_id, message_id)
        if found is None:
            raise OutboundError("The message could not be queued; try again.")
        return found
    if values["sealed"]:  # the placeholders' values, sealed to the new row's id
        clear = {"message_id": message_id, "envelope": values["envelope"]}
        write_sealed(session, Submission, user_id, {created[0][0]: clear})
    # The row is written (one INSERT, no flush); the entity stands for it in the session,
    # with the clear values readers see.
    submission = Submission(id=created[0][0], **values)
    make_transient_to_detached(submission)
    session.add(submission)
    record_submission_change(session, user_id, [submission.id], "created")
    wake_after_commit(session, chosen, due)
    return submission


def cancel_submission(
    session: Session, submission: Submission, *, now: datetime | None = None
) -> bool:
    """Cancel a submission no worker has claimed (scheduled or queued); False otherwise."""
    moment = now or utcnow()
    result = session.execute(
        update(Submission)
        .where(Submission.id == submission.id, Submission.state.in_(WAITING))
        .values(state="canceled", next_attempt_at=None, updated_at=moment)
        .execution_options(synchronize_session=False)
    )
    session.refresh(submission)
    if not result.rowcount:  # type: ignore[attr-defined]
        return False
    record_submission_change(session, submission.user_id, [submission.id])
    return True


def retry_submission(session: Session, submission_id: int, *, now: datetime | None = None) -> str:
    """Re-queue a failed submission as if it were queued now; its lane. NotFoundError otherwise."""
    moment = now or utcnow()
    submission = session.get(Submission, submission_id)
    if submission is None or submission.state != "failed":
        raise NotFoundError(
            f"There is no failed submission {submission_id}; `mailroom outbound failed` lists them."
        )
    session.execute(delete(FailedSend).where(FailedSend.submission_id == submission_id))
    submission.state = "queued"
    submission.queued_at = submission.send_at = submission.next_attempt_at = moment
    submission.attempts = submission.deferrals = 0
    submission.handoff_at = None
    submission.delivery_status = None
    submission.updated_at = moment
    record_submission_change(session, submission.user_id, [submission.id])
    wake_after_commit(session, submission.lane, moment)
    return submission.lane
