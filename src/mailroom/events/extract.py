"""The events enricher: read stored raw HTML, store the events it describes.

It runs in the follow-up job (``follow_up`` on ``enrich_live``, ``enrich`` or
``enrich_backlog``: :data:`mailroom.jobs.tasks.ENRICHERS`), never inside an
ingest transaction, and :func:`backfill_events` runs the same code over mail
already stored. Must be idempotent: rows are unique per ``(message_id,
position)`` and inserted with ``ON CONFLICT DO NOTHING``, so a retried job, a
second worker or a backfill after live extraction adds nothing. Only HTML that
mentions JSON-LD or microdata is read from the store at all. A message that
gained events is an updated Email in the change log (its JMAP ``events``
property changed), in the same transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from mailroom.crypto.mail_reading import open_column
from mailroom.crypto.sealing import seals_new_mail
from mailroom.events.schema import FoundEvent, events_from_items
from mailroom.events.sealed_events import PLACEHOLDERS, write_sealed
from mailroom.events.structured import structured_items
from mailroom.store import changelog
from mailroom.store.bulk import insert_ignoring_conflicts
from mailroom.store.engine import Store
from mailroom.store.models import Message, MessageBody, MessageEvent, User, utcnow

log = logging.getLogger(__name__)

CHUNK = 200  # messages read per query (their HTML can be large)
_MARKER_WORDS = ("ld+json", "itemscope")
# Sealed HTML cannot be searched in SQL: such rows are read, opened and tested here.
_MARKERS = or_(
    MessageBody.sealed,
    *(MessageBody.html_body.ilike(f"%{word}%") for word in _MARKER_WORDS),
)


def _has_markers(html: str | None) -> bool:
    lowered = (html or "").lower()
    return any(word in lowered for word in _MARKER_WORDS)


@dataclass
class ExtractResult:
    """What one extraction stored."""

    messages: int = 0  # messages with structured data looked at
    events: int = 0  # events newly stored


def extract_events(store: Store, message_ids: Sequence[int]) -> None:
    """The enricher: store the events of these messages (see the module)."""
    for start in range(0, len(message_ids), CHUNK):
        with store.session() as session:
            store_events(session, message_ids[start : start + CHUNK])


def store_events(session: Session, message_ids: Sequence[int]) -> ExtractResult:
    """Extract and insert the events of these messages in the caller's transaction."""
    result = ExtractResult()
    if not message_ids:
        return result
    rows = session.execute(
        select(Message.id, Message.user_id, MessageBody.sealed, MessageBody.html_body)
        .join(MessageBody, MessageBody.message_id == Message.id)
        .where(Message.id.in_(list(message_ids)), _MARKERS)
    ).all()
    zones: dict[int, str] = {}
    new: list[dict[str, object]] = []
    for message_id, user_id, sealed, stored in rows:
        html = open_column(session, user_id, message_id, "html_body", stored, sealed)
        if sealed and not _has_markers(html):
            continue
        result.messages += 1
        if user_id not in zones:
            zones[user_id] = _user_zone(session, user_id)
        try:
            found = events_from_items(structured_items(html), zones[user_id])
        except Exception:  # one hostile message must not cost the others
            log.exception("Events of message %s could not be read; skipped.", message_id)
            continue
        new.extend(
            _row(user_id, message_id, position, event) for position, event in enumerate(found)
        )
    if new:
        sealing = seals_new_mail(session)
        clear = {(row["message_id"], row["position"]): row for row in new}
        if sealing:  # written sealed by id below, in this transaction (events.sealed_events)
            new = [{**row, **PLACEHOLDERS} for row in new]
        made = insert_ignoring_conflicts(
            session,
            MessageEvent,
            new,
            ["message_id", "position"],
            ("id", "user_id", "message_id", "position"),
        )
        if sealing:
            for owner in {int(user) for _id, user, _mid, _pos in made}:
                write_sealed(
                    session,
                    owner,
                    {int(i): clear[(m, p)] for i, user, m, p in made if user == owner},
                )
        inserted = [(int(user), int(mid)) for _id, user, mid, _pos in made]
        result.events = len(inserted)
        # `events` is an Email property (urn:mailroom:jmap:events): its state moves.
        for user_id in {user for user, _ in inserted}:
            changed = sorted({mid for user, mid in inserted if user == user_id})
            changelog.record(session, user_id, "Email", changed, "updated")
    return result


def backfill_events(store: Store, user_id: int, chunk: int = CHUNK) -> ExtractResult:
    """Extract the events of every stored message of a user (idempotent; one commit per chunk)."""
    total = ExtractResult()
    for ids in _candidates(store, user_id, chunk):
        with store.session() as session:
            done = store_events(session, ids)
        total.messages += done.messages
        total.events += done.events
    return total


def _candidates(store: Store, user_id: int, chunk: int) -> Iterator[list[int]]:
    """Ids of the user's messages whose HTML may hold structured data, a chunk at a time."""
    after = 0
    while True:
        with store.session() as session:
            ids = list(
                session.scalars(
                    select(MessageBody.message_id)
                    .join(Message, Message.id == MessageBody.message_id)
                    .where(Message.user_id == user_id, MessageBody.message_id > after, _MARKERS)
                    .order_by(MessageBody.message_id)
                    .limit(chunk)
                )
            )
        if not ids:
            return
        yield ids
        after = ids[-1]


def _user_zone(session: Session, user_id: int) -> str:
    """The owner's time zone (web settings), in which times without an offset are read."""
    settings = session.scalar(select(User.settings).where(User.id == user_id)) or {}
    zone = settings.get("timezone") if isinstance(settings, dict) else None
    return zone if isinstance(zone, str) and zone else "UTC"


def _row(user_id: int, message_id: int, position: int, event: FoundEvent) -> dict[str, object]:
    return {
        "user_id": user_id,
        "message_id": message_id,
        "position": position,
        "kind": event.kind,
        "summary": event.summary,
        "location": event.location,
        "starts_at": event.starts_at,
        "ends_at": event.ends_at,
        "all_day": event.all_day,
        "tzid": event.tzid,
        "source": event.source,
        "created_at": utcnow(),
    }
