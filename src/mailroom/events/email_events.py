"""Events of emails as JMAP objects: the ``events`` property of ``urn:mailroom:jmap:events``.

Each event is drawn like a JSCalendar Event (RFC 8984) — what a JMAP
calendar client (JMAP for Calendars) already reads — plus mailroom's own
fields: ``uid`` (the feed's UID), ``title``, ``start`` (a local date-time in
``timeZone``; the event's zone, else ``Etc/UTC``), ``duration``,
``showWithoutTime`` for all-day events, ``locations``, and ``kind`` (the
schema.org type), ``utcStart``/``utcEnd`` and ``source`` (the schema.org
item as the mail had it). A ParcelDelivery without an expected time has
``start`` null.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy.orm import Session

from mailroom.events.feed import event_uid
from mailroom.events.stored import events_of_messages
from mailroom.store.models import MessageEvent
from mailroom.timezones import known_zone

CAPABILITY = "urn:mailroom:jmap:events"
PROPERTY = "events"


def email_events(
    session: Session, user_id: int, message_ids: Sequence[int]
) -> dict[int, list[dict[str, Any]]]:
    """Per message id (of this user), its events as JMAP objects; every id gets a list."""
    out: dict[int, list[dict[str, Any]]] = {mid: [] for mid in message_ids}
    for row in events_of_messages(session, user_id, message_ids):
        out[row.message_id].append(jmap_event(row))
    return out


def jmap_event(row: MessageEvent) -> dict[str, Any]:
    """One stored event as a JSCalendar-like object (module docstring)."""
    found = known_zone(row.tzid)
    zone, zone_name = (found, found.key) if found else (ZoneInfo("Etc/UTC"), "Etc/UTC")
    start = row.starts_at.astimezone(zone) if row.starts_at else None
    event: dict[str, Any] = {
        "@type": "Event",
        "uid": event_uid(row.message_id, row.position),
        "kind": row.kind,
        "title": row.summary,
        "start": _local(start, row.all_day),
        "timeZone": None if row.all_day else zone_name,
        "showWithoutTime": row.all_day,
        "duration": _duration(row.starts_at, row.ends_at),
        "utcStart": _utc(row.starts_at),
        "utcEnd": _utc(row.ends_at),
        "locations": ({"1": {"@type": "Location", "name": row.location}} if row.location else None),
        "source": row.source,
    }
    return event


def _local(moment: datetime | None, all_day: bool) -> str | None:
    if moment is None:
        return None
    if all_day:
        return moment.strftime("%Y-%m-%dT00:00:00")
    return moment.replace(tzinfo=None).isoformat(timespec="seconds")


def _utc(moment: datetime | None) -> str | None:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment else None


def _duration(start: datetime | None, end: datetime | None) -> str | None:
    """An RFC 8984 duration (``P1DT2H30M``), or None without both ends."""
    if start is None or end is None or end < start:
        return None
    span: timedelta = end - start
    days, seconds = span.days, span.seconds
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    clock = "".join(
        f"{value}{unit}" for value, unit in ((hours, "H"), (minutes, "M"), (seconds, "S")) if value
    )
    text = "P" + (f"{days}D" if days else "") + (f"T{clock}" if clock else "")
    return text if text != "P" else "PT0S"
