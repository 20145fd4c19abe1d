"""schema.org items → events: what a calendar needs from a ticket, a booking or a parcel.

Kinds understood (the item's ``@type``; any ``*Event`` subtype counts as
``Event``):

=======================  ===============================  =========================
kind                     start / end                      summary, location
=======================  ===============================  =========================
Event                    startDate / endDate              name; location
EventReservation         its reservationFor (an Event)    the event's
FlightReservation        departureTime / arrivalTime of   "Flight LH 400 FRA → JFK";
                         reservationFor (a Flight)        the departure airport
TrainReservation,        the same of a TrainTrip /        "Train ICE 599 …"
BusReservation           BusTrip
LodgingReservation       checkinTime|Date / checkout…     "Stay at <hotel>"; address
FoodEstablishment-       startTime / endTime              the restaurant; address
Reservation
ParcelDelivery           expectedArrivalFrom / …Until     "Delivery: <item>"; address
=======================  ===============================  =========================

Times: ISO 8601 with an offset are instants (kept in UTC); a time without one
is the wall time where the event happens, read in ``local_zone`` (the owner's
zone) and remembered as the event's ``tzid``; a date alone is an all-day
event. An end that is a date is exclusive for all-day events, so an Event
ending on the 16th covers the 16th. Nothing here raises on odd input: an item
without a name and a time is not an event.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from mailroom.timezones import known_zone

MAX_FIELD = 500  # characters of a summary or location
MAX_SOURCE = 64_000  # characters of an item's JSON kept as its source
_EARLIEST, _LATEST = 1970, 2200
_CONTROLS = {code: " " for code in [*range(32), 127]}

RESERVATIONS = {
    "EventReservation",
    "FlightReservation",
    "TrainReservation",
    "BusReservation",
    "LodgingReservation",
    "FoodEstablishmentReservation",
}
KINDS = frozenset({"Event", "ParcelDelivery", *RESERVATIONS})


@dataclass(frozen=True, slots=True)
class FoundEvent:
    """One event found in a message, ready to store."""

    kind: str
    summary: str
    location: str | None
    starts_at: datetime | None  # UTC
    ends_at: datetime | None  # UTC; exclusive for all-day events
    all_day: bool
    tzid: str | None  # the zone of a wall time the mail gave; None: an instant (UTC)
    source: dict[str, Any]


def events_from_items(items: list[dict[str, Any]], local_zone: str = "UTC") -> list[FoundEvent]:
    """The events among ``items``, without repeats (the same event in JSON-LD and microdata)."""
    zone = _zone(local_zone)
    found: list[FoundEvent] = []
    seen: set[tuple[str, datetime | None, datetime | None]] = set()
    for item in items:
        try:
            event = _event(item, zone)
        except (TypeError, ValueError, AttributeError, OverflowError, RecursionError):
            event = None
        if event is None:
            continue
        key = (event.summary.casefold(), event.starts_at, event.ends_at)
        if key not in seen:
            seen.add(key)
            found.append(event)
    return found


def kind_of(item: Any) -> str | None:
    """The kind of a schema.org item (``Event`` for every ``*Event`` type), or None."""
    if not isinstance(item, dict):
        return None
    types = item.get("@type")
    for value in types if isinstance(types, list) else [types]:
        if not isinstance(value, str):
            continue
        name = value.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]
        if name in KINDS:
            return name
        if name.endswith("Event") or name == "Festival":
            return "Event"
    return None


def _event(item: dict[str, Any], zone: ZoneInfo) -> FoundEvent | None:
    kind = kind_of(item)
    if kind is None:
        return None
    target = _first(item.get("reservationFor"))
    subject = target if kind in RESERVATIONS and isinstance(target, dict) else item
    if kind == "Event" or kind == "EventReservation":
        summary = _text(subject.get("name")) or _text(item.get("name"))
        start, end = subject.get("startDate"), subject.get("endDate")
        location = _place(subject.get("location"))
    elif kind in ("FlightReservation", "TrainReservation", "BusReservation"):
        summary = _trip_summary(kind, subject)
        start, end = subject.get("departureTime"), subject.get("arrivalTime")
        location = _place(
            _first(subject.get("departureAirport"))
            or _first(subject.get("departureStation"))
            or _first(subject.get("departureBusStop"))
        )
    elif kind == "LodgingReservation":
        name = _text(subject.get("name"))
        summary = f"Stay at {name}" if name else ""
        start = item.get("checkinTime") or item.get("checkinDate")
        end = item.get("checkoutTime") or item.get("checkoutDate")
        location = _place(subject)
    elif kind == "FoodEstablishmentReservation":
        summary = _text(subject.get("name"))
        start, end = item.get("startTime"), item.get("endTime")
        location = _place(subject)
    else:  # ParcelDelivery
        shipped = _first(item.get("itemShipped"))
        what = _text(shipped.get("name")) if isinstance(shipped, dict) else ""
        carrier = _name(item.get("carrier") or item.get("provider"))
        summary = f"Delivery: {what}" if what else "Parcel delivery"
        if carrier:
            summary += f" ({carrier})"
        start = item.get("expectedArrivalFrom")
        end = item.get("expectedArrivalUntil")
        location = _place(item.get("deliveryAddress"))
    if not summary:
        return None
    starts, start_is_date, start_zone = _moment(_first(start), zone)
    ends, end_is_date, end_zone = _moment(_first(end), zone)
    if starts is None and kind != "ParcelDelivery":
        return None  # an event nobody can put in a calendar
    all_day = starts is not None and start_is_date
    if ends is not None and starts is not None:
        if all_day and end_is_date and kind != "LodgingReservation":
            ends += timedelta(days=1)  # an inclusive last day
        if end_is_date != start_is_date or ends < starts:
            ends = None
    tzid = start_zone if not all_day else None
    return FoundEvent(
        kind=kind,
        summary=summary[:MAX_FIELD],
        location=location[:MAX_FIELD] if location else None,
        starts_at=starts,
        ends_at=ends,
        all_day=all_day,
        tzid=tzid or (end_zone if starts is None else None),
        source=_source(item),
    )


def _trip_summary(kind: str, trip: dict[str, Any]) -> str:
    word = {"FlightReservation": "Flight", "TrainReservation": "Train"}.get(kind, "Bus")
    carrier = _first(trip.get("airline") or trip.get("provider"))
    code = ""
    if isinstance(carrier, dict):
        code = _text(carrier.get("iataCode")) or _text(carrier.get("name"))
    number = _text(trip.get("flightNumber") or trip.get("trainNumber") or trip.get("busNumber"))
    if code and number.upper().startswith(code.upper()):
        code = ""  # "LH400" already names the airline
    start = _stop(
        trip.get("departureAirport") or trip.get("departureStation") or trip.get("departureBusStop")
    )
    end = _stop(
        trip.get("arrivalAirport") or trip.get("arrivalStation") or trip.get("arrivalBusStop")
    )
    parts = [word, " ".join(p for p in (code, number) if p)]
    if start or end:
        parts.append(f"{start or '?'} → {end or '?'}")
    summary = " ".join(p for p in parts if p)
    return summary if summary != word else ""


def _stop(value: Any) -> str:
    value = _first(value)
    if isinstance(value, dict):
        return _text(value.get("iataCode")) or _text(value.get("name"))
    return _text(value)


def describe(item: dict[str, Any]) -> str:
    """Booking details a calendar entry should carry: number, name, party, seat, tracking."""
    try:
        return _description(item)[: MAX_FIELD * 4]
    except (TypeError, ValueError, AttributeError):
        return ""


def _description(item: dict[str, Any]) -> str:
    lines = []
    for key, label in (
        ("reservationNumber", "Booking"),
        ("trackingNumber", "Tracking number"),
        ("partySize", "Party of"),
    ):
        value = _text(_first(item.get(key)))
        if value:
            lines.append(f"{label}: {value}")
    under = _name(item.get("underName") or item.get("partyName"))
    if under:
        lines.append(f"Name: {under}")
    ticket = _first(item.get("reservedTicket"))
    seat = _first(ticket.get("ticketedSeat")) if isinstance(ticket, dict) else None
    if isinstance(seat, dict):
        where = " ".join(
            f"{label} {_text(seat.get(key))}"
            for key, label in (
                ("seatSection", "section"),
                ("seatRow", "row"),
                ("seatNumber", "seat"),
            )
            if _text(seat.get(key))
        )
        if where:
            lines.append(f"Seat: {where}")
    for key in ("trackingUrl", "url"):
        value = _text(_first(item.get(key)))
        if value.startswith(("https://", "http://")):
            lines.append(value)
            break
    return "\n".join(lines)


def _moment(value: Any, zone: ZoneInfo) -> tuple[datetime | None, bool, str | None]:
    """(UTC instant, was a date alone, the zone of a wall time) of an ISO 8601 value."""
    text = _text(value)
    if not text or len(text) > 64:
        return None, False, None
    text = text.replace("Z", "+00:00").replace("z", "+00:00")
    try:
        moment = date.fromisoformat(text) if len(text) == 10 else datetime.fromisoformat(text)
    except ValueError:
        return None, False, None
    if not _EARLIEST <= moment.year <= _LATEST:
        return None, False, None
    if not isinstance(moment, datetime):  # a date alone: an all-day event
        return datetime(moment.year, moment.month, moment.day, tzinfo=UTC), True, None
    if moment.tzinfo is None:
        local = moment.replace(tzinfo=zone).astimezone(UTC)
        return local, False, None if zone.key in ("UTC", "Etc/UTC") else zone.key
    return moment.astimezone(UTC), False, None


def _place(value: Any) -> str:
    """A readable place: the name and the address of a Place, or the text given."""
    value = _first(value)
    if isinstance(value, str):
        return _plain(value)[:MAX_FIELD]
    if not isinstance(value, dict):
        return ""
    name = _text(value.get("name"))
    address = _first(value.get("address"))
    if "streetAddress" in value or "addressLocality" in value:
        address = value  # a PostalAddress itself (a delivery address)
    if isinstance(address, dict):
        street = ", ".join(
            part
            for part in (
                _text(address.get(key))
                for key in (
                    "streetAddress",
                    "postalCode",
                    "addressLocality",
                    "addressRegion",
                    "addressCountry",
                )
            )
            if part
        )
    else:
        street = _text(address)
    code = _text(value.get("iataCode"))
    if code and name and code not in name:
        name = f"{name} ({code})"
    return ", ".join(part for part in (name or code, street) if part)


def _name(value: Any) -> str:
    value = _first(value)
    if isinstance(value, dict):
        return _text(value.get("name"))
    return _text(value)


def _first(value: Any) -> Any:
    """The first of a list (JSON-LD allows one or many values anywhere)."""
    while isinstance(value, list):
        value = value[0] if value else None
    return value


def _text(value: Any) -> str:
    """A plain string from a JSON-LD value (a string, a number, or ``{"@value": ...}``)."""
    value = _first(value)
    if isinstance(value, dict):
        value = value.get("@value")
    if isinstance(value, bool) or value is None:
        return ""
    if isinstance(value, int | float | str):
        return _plain(str(value))[:MAX_FIELD]
    return ""


def _plain(text: str) -> str:
    """One line of text: whitespace runs as one space, control characters gone.

    PostgreSQL refuses NUL in text, and RFC 5545 allows no control characters.
    """
    return " ".join(text.translate(_CONTROLS).split())


def _source(item: dict[str, Any]) -> dict[str, Any]:
    """The item as stored: itself when it is small and plain JSON, else its type only."""
    try:
        text = json.dumps(item, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return {"@type": item.get("@type") if isinstance(item.get("@type"), str) else None}
    if len(text) > MAX_SOURCE:
        return {"@type": item.get("@type"), "truncated": True}
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _zone(name: str) -> ZoneInfo:
    return known_zone(name) or ZoneInfo("UTC")
