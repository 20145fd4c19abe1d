"""Turning what mailroom records durably into webhook deliveries, per endpoint and cursor.

Nothing hooks the write paths: events are read from records that commit with
the change they describe.

* ``Email`` — the JMAP change log. The rows after the endpoint's cursor are
  folded as ``Email/changes`` folds them (:func:`mailroom.store.changelog.changes_since`):
  created → ``messageNew``, updated → ``messageUpdated``, destroyed →
  ``messageDeleted``. Message events start once the message's account has
  finished importing: what the import brings is announced by one
  ``accountInitialized``, not by a ``messageNew`` per old mail (a new mail is
  one stored after ``import_finished_at``).
* ``EmailSubmission`` — the change log again: every state change of a
  submission writes a row. A submission now ``sent`` is ``messageSent``; its
  ``failed_sends`` row ``messageFailed``; each of its ``bounces`` rows
  ``messageBounced``. A sealed submission's Message-ID, recipients, reason and
  report (``outbound.sealed_queue``) are opened for the payload.
* ``account`` — ``account_events``, written by triggers on ``accounts``.

One round of one (endpoint, source) runs in one transaction that first takes
the cursor row's lock (a no-op UPDATE: the row lock on PostgreSQL, the write
lock on SQLite), so rounds of one endpoint never overlap; the deliveries and
the new cursor commit together. A source with nothing past the cursor is left
without taking the lock, so idle rounds write nothing. Event ids are made from the records
(:mod:`mailroom.webhooks.events`) and a delivery is unique per endpoint and
event id, so even a record read twice is delivered once.

The change log is safe to read by sequence (a user's rows commit in sequence
order, see :mod:`mailroom.store.changelog`). Account events are not locked
that way on PostgreSQL, so each round also looks again at the last
:data:`LOOKBACK` of them; the unique delivery makes that harmless.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from mailroom.crypto.sealing import seals_new_mail
from mailroom.jmap.sealed_columns import message_ids_of, opened
from mailroom.outbound.sealed_queue import BOUNCES, FAILED_SENDS, SUBMISSIONS, read_value
from mailroom.store import changelog
from mailroom.store.bulk import insert_ignoring_conflicts
from mailroom.store.engine import Store
from mailroom.store.models import (
    Account,
    AccountEvent,
    Bounce,
    Change,
    FailedSend,
    Message,
    Submission,
    WebhookCursor,
    WebhookDelivery,
    WebhookEndpoint,
)
from mailroom.webhooks.endpoints import SOURCES
from mailroom.webhooks.events import Event
from mailroom.webhooks.sealed_bodies import write_sealed

__all__ = ["LIMIT", "LOOKBACK", "derive_all", "derive_endpoint"]

LIMIT = 500  # change rows (or account events) read per endpoint and source in one round
LOOKBACK = timedelta(minutes=10)


def derive_all(store: Store, now: datetime) -> tuple[int, bool]:
    """One round for every active endpoint: deliveries made, and whether a source has more."""
    with store.session() as session:
        ids = list(
            session.scalars(select(WebhookEndpoint.id).where(WebhookEndpoint.active.is_(True)))
        )
    made, more = 0, False
    for endpoint_id in ids:
        count, left = derive_endpoint(store, endpoint_id, now)
        made, more = made + count, more or left
    return made, more


def derive_endpoint(store: Store, endpoint_id: int, now: datetime) -> tuple[int, bool]:
    """One round of each source of one endpoint: deliveries made, and whether more is left."""
    made, more = 0, False
    for source in SOURCES:
        with store.session() as session:
            count, left = _round(session, endpoint_id, source, now)
        made, more = made + count, more or left
    return made, more


def _anything_new(session: Session, endpoint_id: int, source: str, now: datetime) -> bool:
    """Whether the source may hold something past the cursor (read without taking a lock)."""
    row = session.execute(
        select(WebhookCursor.position, WebhookEndpoint.user_id)
        .join(WebhookEndpoint, WebhookEndpoint.id == WebhookCursor.endpoint_id)
        .where(WebhookCursor.endpoint_id == endpoint_id, WebhookCursor.source == source)
    ).first()
    if row is None:
        return False
    if source == "account":
        recent = or_(AccountEvent.id > row.position, AccountEvent.created_at >= now - LOOKBACK)
        query = select(AccountEvent.id).where(AccountEvent.user_id == row.user_id, recent)
    else:
        query = select(Change.seq).where(
            Change.user_id == row.user_id, Change.type == source, Change.seq > row.position
        )
    return session.execute(query.limit(1)).first() is not None


def _round(session: Session, endpoint_id: int, source: str, now: datetime) -> tuple[int, bool]:
    if not _anything_new(session, endpoint_id, source, now):
        return 0, False  # an idle round writes nothing (no lock, no transaction on SQLite)
    where = (WebhookCursor.endpoint_id == endpoint_id, WebhookCursor.source == source)
    locked = session.execute(
        update(WebhookCursor).where(*where).values(position=WebhookCursor.position)
    )
    endpoint = session.get(WebhookEndpoint, endpoint_id)
    if not locked.rowcount or endpoint is None or not endpoint.active:  # type: ignore[attr-defined]
        return 0, False
    position = int(session.scalar(select(WebhookCursor.position).where(*where)) or 0)
    if source == "Email":
        events, position, more = _email_events(session, endpoint, position, now)
    elif source == "EmailSubmission":
        events, position, more = _submission_events(session, endpoint, position)
    else:
        events, position, more = _account_events(session, endpoint, position, now)
    wanted = set(endpoint.events)
    rows = [
        {
            "endpoint_id": endpoint_id,
            "event_id": event.id,
            "event_type": event.type,
            "body": event.body(),
            "state": "pending",
            "attempts": 0,
            "next_attempt_at": now,
            "created_at": now,
        }
        for event in events
        if event.type in wanted
    ]
    sealing = seals_new_mail(session)
    clear = {str(row["event_id"]): str(row["body"]) for row in rows}
    if sealing:  # written sealed by id below, in this transaction (webhooks.sealed_bodies)
        rows = [{**row, "body": ""} for row in rows]
    made = insert_ignoring_conflicts(
        session,
        WebhookDelivery,
        rows,
        conflict=["endpoint_id", "event_id"],
        returning=["id", "event_id"],
    )
    if sealing:
        write_sealed(session, endpoint.user_id, {d: clear[str(event)] for d, event in made})
    session.execute(update(WebhookCursor).where(*where).values(position=position))
    return len(made), more


# -- Email -----------------------------------------------------------------------------


def _messages(session: Session, ids: Iterable[int]) -> list[Any]:
    wanted = sorted(set(ids))
    if not wanted:
        return []
    rows = list(
        session.execute(
            select(
                Message.id,
                Message.user_id,
                Message.sealed,
                Message.account_id,
                Message.thread_id,
                Message.message_id_header,
                Message.subject,
                Message.from_name,
                Message.from_email,
                Message.received_at,
                Message.created_at,
                Account.import_finished_at,
            )
            .join(Account, Account.id == Message.account_id)
            .where(Message.id.in_(wanted))
            .order_by(Message.id)
        )
    )
    sealed = [row.id for row in rows if row.sealed]
    if not sealed:
        return rows
    # Sealed rows (crypto.message_fields): columns opened, the Message-ID from the headers.
    header_ids = message_ids_of(session, sealed)
    opened_rows = opened(session, rows, ["subject", "from_name", "from_email"])
    for row in opened_rows:
        if row.sealed:
            row.message_id_header = header_ids.get(row.id)
    return opened_rows


def _email_data(row: Any) -> dict[str, Any]:
    return {
        "emailId": row.id,
        "accountId": row.account_id,
        "threadId": row.thread_id,
        "messageId": row.message_id_header,
        "subject": row.subject,
        "from": {"name": row.from_name, "email": row.from_email},
        "receivedAt": row.received_at.isoformat(),
    }


def _email_events(
    session: Session, endpoint: WebhookEndpoint, position: int, now: datetime
) -> tuple[list[Event], int, bool]:
    window = changelog.changes_since(session, endpoint.user_id, "Email", position, LIMIT)
    events = [
        Event(f"messageNew-{row.id}", "messageNew", row.created_at, _email_data(row))
        for row in _messages(session, window.created)
        if row.import_finished_at is not None and row.created_at >= row.import_finished_at
    ]
    events += [
        Event(
            f"messageUpdated-{row.id}-{window.new_state}",
            "messageUpdated",
            now,
            _email_data(row),
        )
        for row in _messages(session, window.updated)
        if row.import_finished_at is not None
    ]
    events += [
        Event(f"messageDeleted-{email_id}", "messageDeleted", now, {"emailId": email_id})
        for email_id in window.destroyed
    ]
    return events, window.new_state, window.has_more


# -- EmailSubmission ---------------------------------------------------------------------


def _recipients(envelope: Any) -> list[str]:
    items = (envelope or {}).get("rcptTo", []) if isinstance(envelope, dict) else []
    return [str(item.get("email", "")) for item in items if isinstance(item, dict)]


def _submissions(session: Session, ids: list[int]) -> dict[int, Any]:
    """The submissions ``ids`` by id, a sealed one's Message-ID and envelope opened."""
    rows = session.execute(
        select(
            Submission.id,
            Submission.user_id,
            Submission.sealed,
            Submission.account_id,
            Submission.email_id,
            Submission.message_id,
            Submission.state,
            Submission.sent_at,
            Submission.envelope,
        ).where(Submission.id.in_(ids))
    )
    found: dict[int, Any] = {}
    for row in rows:
        values = row._asdict()
        for column in ("message_id", "envelope"):
            value = values[column]
            values[column] = read_value(
                session, row.user_id, SUBMISSIONS, column, row.id, value, row.sealed
            )
        found[row.id] = SimpleNamespace(**values)
    return found


def _submission_events(
    session: Session, endpoint: WebhookEndpoint, position: int
) -> tuple[list[Event], int, bool]:
    window = changelog.changes_since(session, endpoint.user_id, "EmailSubmission", position, LIMIT)
    ids = sorted({*window.created, *window.updated})
    if not ids:
        return [], window.new_state, window.has_more
    since = endpoint.created_at
    submissions = _submissions(session, ids)

    def reported(table: str, column: str, row: FailedSend | Bounce) -> Any:
        """A column of a row reporting on a submission, opened when the submission is sealed."""
        owner = submissions[row.submission_id]
        value = getattr(row, column)
        return read_value(session, owner.user_id, table, column, row.id, value, owner.sealed)

    def about(submission_id: int) -> dict[str, Any]:
        row = submissions[submission_id]
        return {
            "submissionId": row.id,
            "accountId": row.account_id,
            "emailId": row.email_id,
            "messageId": row.message_id,
            "recipients": _recipients(row.envelope),
        }

    events = [
        Event(
            f"messageSent-{row.id}",
            "messageSent",
            row.sent_at,
            {**about(row.id), "sentAt": row.sent_at.isoformat()},
        )
        for row in submissions.values()
        if row.state == "sent" and row.sent_at is not None and row.sent_at >= since
    ]
    failed = session.scalars(
        select(FailedSend).where(FailedSend.submission_id.in_(ids), FailedSend.failed_at >= since)
    )
    events += [
        Event(
            # failed_at, not the row id: SQLite may give a retried submission's row the same id.
            f"messageFailed-{row.submission_id}-{int(row.failed_at.timestamp() * 1000)}",
            "messageFailed",
            row.failed_at,
            {
                **about(row.submission_id),
                "reason": reported(FAILED_SENDS, "reason", row),
                "code": row.code,
                "attempts": row.attempts,
                "failedAt": row.failed_at.isoformat(),
            },
        )
        for row in failed
        if row.submission_id in submissions
    ]
    bounces = session.scalars(
        select(Bounce).where(Bounce.submission_id.in_(ids), Bounce.received_at >= since)
    )
    events += [
        Event(
            f"messageBounced-{row.id}",
            "messageBounced",
            row.received_at,
            {
                **about(row.submission_id),
                "bounceEmailId": row.message_id,
                "report": reported(BOUNCES, "recipients", row),
            },
        )
        for row in bounces
        if row.submission_id in submissions
    ]
    return events, window.new_state, window.has_more


# -- account events ----------------------------------------------------------------------


def _account_rows(session: Session, query: Any) -> Sequence[Any]:
    return session.execute(query.order_by(AccountEvent.id).limit(LIMIT)).all()


def _account_events(
    session: Session, endpoint: WebhookEndpoint, position: int, now: datetime
) -> tuple[list[Event], int, bool]:
    base = (
        select(AccountEvent, Account.name)
        .join(Account, Account.id == AccountEvent.account_id)
        .where(
            AccountEvent.user_id == endpoint.user_id,
            AccountEvent.created_at >= endpoint.created_at,
        )
    )
    fresh = _account_rows(session, base.where(AccountEvent.id > position))
    again = _account_rows(
        session,
        base.where(
            AccountEvent.id <= position,
            AccountEvent.created_at >= now - LOOKBACK,
        ),
    )
    events = [
        Event(
            f"{row.type}-{row.id}",
            row.type,
            row.created_at,
            {
                "accountId": row.account_id,
                "account": name,
                "status": row.status,
                "previousStatus": row.previous_status,
                "reason": row.reason,
            },
        )
        for row, name in [*again, *fresh]
    ]
    end = max([position, *(row.id for row, _ in fresh)])
    return events, end, len(fresh) >= LIMIT
