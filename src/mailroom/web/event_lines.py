"""The events found in a thread's messages, as the thread page lists them.

One line per event: its title, when (in the user's time zone; all-day events
as dates), and where — read for the whole thread in one query
(:func:`mailroom.events.stored.events_of_messages`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta, tzinfo

from sqlalchemy.orm import Session

from mailroom.events.stored import events_of_messages
from mailroom.store.models import MessageEvent
from mailroom.web.display import full_time


@dataclass(frozen=True, slots=True)
class EventLine:
    """One event of a message, ready to show."""

    title: str
    when: str
    stamp: str  # ISO 8601 for <time datetime>
    location: str | None


def event_lines(
    session: Session, user_id: int, message_ids: Sequence[int], zone: tzinfo
) -> dict[int, list[EventLine]]:
    """Message id -> its events' lines (messages without events are absent)."""
    lines: dict[int, list[EventLine]] = {}
    for event in events_of_messages(session, user_id, message_ids):
        lines.setdefault(event.message_id, []).append(_line(event, zone))
    return lines


def _line(event: MessageEvent, zone: tzinfo) -> EventLine:
    start, end = event.starts_at, event.ends_at
    if start is None:
        return EventLine(event.summary, "time not given", "", event.location)
    if event.all_day:
        # A stay ends on the day of checking out; other all-day ends are exclusive.
        nights = event.kind == "LodgingReservation"
        last = (
            (end - timedelta(days=0 if nights else 1)).date()
            if end and end > start
            else start.date()
        )
        when = start.date().isoformat()
        if last != start.date():
            when += f" – {last.isoformat()}"
        return EventLine(event.summary, when, start.date().isoformat(), event.location)
    when = full_time(start, zone)
    if end is not None:
        same_day = end.astimezone(zone).date() == start.astimezone(zone).date()
        when += " – " + (
            end.astimezone(zone).strftime("%H:%M") if same_day else full_time(end, zone)
        )
    return EventLine(event.summary, when, start.isoformat(), event.location)
