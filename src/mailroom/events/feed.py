"""A user's events as an iCalendar feed (RFC 5545), written by the ``icalendar`` package.

One VEVENT per stored event with a start: ``UID`` stable per event (the
message and its position, so a calendar program updates instead of
duplicating when the feed is fetched again), ``DTSTAMP`` (when mailroom
found it), ``DTSTART``/``DTEND`` — ``VALUE=DATE`` for all-day events, a
``TZID`` with its VTIMEZONE for wall times the mail gave, UTC otherwise —
``SUMMARY``, ``LOCATION``, a ``DESCRIPTION`` of the booking details, and
``CATEGORIES`` with the kind. Escaping and 75-octet folding are the
library's. Events of mail in Spam or Trash are left out: a spammer should
not be able to write into the owner's calendar. The feed holds the events
that start from ``PAST`` ago on, at most ``LIMIT`` of them.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

import icalendar
from sqlalchemy import and_, exists, select
from sqlalchemy.orm import Session

from mailroom.events.schema import describe
from mailroom.store.models import Label, MessageEvent, MessageLabel, utcnow
from mailroom.timezones import known_zone

PAST = timedelta(days=400)
LIMIT = 5_000
PRODID = "-//mailroom//events from mail//EN"
_HIDDEN_ROLES = ("spam", "trash")


def event_uid(message_id: int, position: int) -> str:
    """The UID of an event: stable for as long as its message is stored."""
    return f"{message_id}-{position}@events.mailroom"


def feed_events(session: Session, user_id: int, now: datetime | None = None) -> list[MessageEvent]:
    """The events the feed shows: with a start, from ``PAST`` ago on, not from Spam or Trash."""
    hidden = exists().where(
        and_(
            MessageLabel.message_id == MessageEvent.message_id,
            MessageLabel.label_id == Label.id,
            Label.user_id == user_id,
            Label.role.in_(_HIDDEN_ROLES),
        )
    )
    return list(
        session.scalars(
            select(MessageEvent)
            .where(
                MessageEvent.user_id == user_id,
                MessageEvent.starts_at.is_not(None),
                MessageEvent.starts_at >= (now or utcnow()) - PAST,
                ~hidden,
            )
            .order_by(MessageEvent.starts_at, MessageEvent.id)
            .limit(LIMIT)
        )
    )


def calendar_feed(session: Session, user_id: int, now: datetime | None = None) -> bytes:
    """The user's feed as ``text/calendar`` bytes."""
    calendar = icalendar.Calendar()
    calendar.add("prodid", PRODID)
    calendar.add("version", "2.0")
    calendar.add("calscale", "GREGORIAN")
    calendar.add("x-wr-calname", "Events from mail")
    events = feed_events(session, user_id, now)
    for event in events:
        calendar.add_component(_vevent(event))
    if events:
        first = min(e.starts_at for e in events if e.starts_at) - timedelta(days=1)
        last = max(e.ends_at or e.starts_at for e in events if e.starts_at) + timedelta(days=366)
        calendar.add_missing_timezones(first_date=first.date(), last_date=last.date())
    return bytes(calendar.to_ical())


def _vevent(event: MessageEvent) -> icalendar.Event:
    vevent = icalendar.Event()
    vevent.add("uid", event_uid(event.message_id, event.position))
    vevent.add("dtstamp", event.created_at)
    assert event.starts_at is not None  # feed_events keeps only events with a start
    vevent.add("dtstart", _when(event.starts_at, event.all_day, event.tzid))
    if event.ends_at is not None:
        vevent.add("dtend", _when(event.ends_at, event.all_day, event.tzid))
    vevent.add("summary", event.summary)
    if event.location:
        vevent.add("location", event.location)
    details = describe(event.source) if isinstance(event.source, dict) else ""
    if details:
        vevent.add("description", details)
    vevent.add("categories", [event.kind])
    vevent.add("transp", "TRANSPARENT" if event.kind == "ParcelDelivery" else "OPAQUE")
    return vevent


def _when(moment: datetime, all_day: bool, tzid: str | None) -> date | datetime:
    """A DATE for all-day events, the wall time in its zone, or the UTC instant."""
    if all_day:
        return moment.date()
    zone = known_zone(tzid)
    return moment.astimezone(zone) if zone is not None else moment
