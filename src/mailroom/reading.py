"""Read models shared by the CLI and the web page: messages and threads as plain dicts."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from mailroom.errors import NotFoundError
from mailroom.store.models import Account, Label, Message, MessageBody, MessageLabel, Thread
from mailroom.store.search import match_clause


def _labels_of(session: Session, message_ids: Sequence[int]) -> dict[int, list[str]]:
    labels: dict[int, list[str]] = defaultdict(list)
    if message_ids:
        rows = session.execute(
            select(MessageLabel.message_id, Label.path)
            .join(Label, Label.id == MessageLabel.label_id)
            .where(MessageLabel.message_id.in_(message_ids))
            .order_by(Label.path)
        )
        for message_id, path in rows:
            labels[message_id].append(path)
    return labels


def search_ids(session: Session, user_id: int, query: str, limit: int = 100) -> list[int]:
    """Ids of the user's messages matching a full-text query, newest first (binned excluded)."""
    dialect = session.get_bind().dialect.name
    clause = match_clause(dialect, query)
    if clause is None:
        return []
    condition, params = clause
    rows = session.execute(
        text(
            "SELECT messages.id FROM messages LEFT JOIN threads ON threads.id = messages.thread_id "
            f"WHERE messages.user_id = :user AND {condition} "
            "AND (threads.in_trash IS NULL OR NOT threads.in_trash) "
            "ORDER BY messages.received_at DESC, messages.id DESC LIMIT :limit"
        ),
        {"user": user_id, "limit": limit, **params},
    )
    return [row[0] for row in rows]


def label_id(session: Session, user_id: int, path: str) -> int:
    """The id of the user's label ``path`` (exact, else ignoring case); NotFoundError if none."""
    exact = session.scalar(select(Label.id).where(Label.user_id == user_id, Label.path == path))
    if exact is not None:
        return exact
    folded = session.scalars(
        select(Label.id).where(Label.user_id == user_id, func.lower(Label.path) == path.lower())
    ).all()
    if len(folded) != 1:
        raise NotFoundError(f"There is no label {path!r}; `mailroom labels` lists them.")
    return folded[0]


@dataclass(frozen=True, slots=True)
class MessageFilter:
    """What `mailroom list` narrows to; every field left at its default matches everything."""

    label_id: int | None = None
    category: str | None = None
    unread: bool = False
    repaired: bool = False  # stored with parse notes (a damaged part was repaired)


def count_messages(session: Session, user_id: int, where: MessageFilter = MessageFilter()) -> int:
    """How many of the user's messages match the filter."""
    query = _filtered(select(func.count(Message.id)).where(Message.user_id == user_id), where)
    return session.scalar(query) or 0


def _filtered(query: Any, where: MessageFilter) -> Any:
    if where.label_id is not None:
        query = query.where(
            Message.id.in_(
                select(MessageLabel.message_id).where(MessageLabel.label_id == where.label_id)
            )
        )
    if where.category is not None:
        query = query.where(Message.category == where.category)
    if where.unread:
        query = query.where(Message.seen_at.is_(None))
    if where.repaired:
        # JSON on both stores; json_array_length exists in SQLite and PostgreSQL alike.
        query = query.where(func.json_array_length(Message.parse_notes) > 0)
    return query


def list_messages(
    session: Session,
    user_id: int,
    *,
    limit: int | None = None,
    ids: Sequence[int] | None = None,
    where: MessageFilter = MessageFilter(),
) -> list[dict[str, Any]]:
    """The user's messages (or the given ids), newest first, as dicts for `mailroom list`."""
    query = _filtered(
        select(Message, Account.name)
        .join(Account, Account.id == Message.account_id)
        .where(Message.user_id == user_id)
        .order_by(Message.received_at.desc(), Message.id.desc()),
        where,
    )
    if ids is not None:
        query = query.where(Message.id.in_(ids))
    if limit is not None:
        query = query.limit(limit)
    rows = session.execute(query).all()
    labels = _labels_of(session, [message.id for message, _ in rows])
    return [
        {
            "id": message.id,
            "account": account,
            "message_id": message.message_id_header,
            "thread_id": message.thread_id,
            "subject": message.subject,
            "from": message.from_email,
            "from_name": message.from_name,
            "received_at": message.received_at.isoformat(),
            "category": message.category,
            "labels": labels.get(message.id, []),
            "seen": message.seen_at is not None,
        }
        for message, account in rows
    ]


def newest_threads(session: Session, user_id: int, limit: int = 50) -> list[dict[str, Any]]:
    """The user's newest threads (binned ones left out) with their senders, for the web page."""
    threads = session.scalars(
        select(Thread)
        .where(Thread.user_id == user_id, Thread.message_count > 0, Thread.in_trash.is_(False))
        .order_by(Thread.last_message_at.desc(), Thread.id.desc())
        .limit(limit)
    ).all()
    senders: dict[int | None, list[str]] = defaultdict(list)
    if threads:
        rows = session.execute(
            select(Message.thread_id, Message.from_name, Message.from_email)
            .where(Message.thread_id.in_([t.id for t in threads]))
            .order_by(Message.received_at)
        )
        for thread_id, name, email in rows:
            who = name or email
            if who and who not in senders[thread_id]:
                senders[thread_id].append(who)
    return [
        {
            "id": thread.id,
            "subject": thread.subject,
            "message_count": thread.message_count,
            "unread_count": thread.unread_count,
            "last_message_at": thread.last_message_at,
            "category": thread.category,
            "senders": senders.get(thread.id, []),
        }
        for thread in threads
    ]


def message_detail(session: Session, user_id: int, message_id: int) -> dict[str, Any]:
    """One message with bodies and parse notes; NotFoundError if not the user's."""
    message = session.get(Message, message_id)
    if message is None or message.user_id != user_id:
        raise NotFoundError(f"There is no message {message_id}; `mailroom list` shows the ids.")
    body = session.get(MessageBody, message_id)
    detail = list_messages(session, user_id, ids=[message_id])[0]
    detail.update(
        {
            "to": message.recipients.get("to", []),
            "cc": message.recipients.get("cc", []),
            "preview": message.preview,
            "text": body.text_body if body else "",
            "sanitized_html": body.sanitized_html if body else None,
            "attachments": body.attachments if body else [],
            "parse_notes": message.parse_notes,
            "thread_note": message.thread_note,
            "category_stage": message.category_stage,
            "category_signal": message.category_signal,
        }
    )
    return detail
