"""Structured data in HTML mail → events: the four real-world shapes and hostile input."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from mailroom.events.schema import describe, events_from_items, kind_of
from mailroom.events.structured import MAX_ITEMS, structured_items

SAMPLES = Path(__file__).parent / "samples"


def events_of(html: str, zone: str = "UTC") -> list:  # type: ignore[type-arg]
    """The events found in ``html``."""
    return events_from_items(structured_items(html), zone)


def sample(name: str) -> str:
    """One of the sample mails' HTML."""
    return (SAMPLES / f"{name}.html").read_text()


def test_airline_json_ld_list_gives_both_flights() -> None:
    """A JSON-LD list of two FlightReservations gives two flights with times in UTC."""
    first, back = events_of(sample("airline"))
    assert first.kind == "FlightReservation"
    assert first.summary == "Flight LH 400 FRA → JFK"
    assert first.location == "Frankfurt Airport (FRA)"
    assert first.starts_at == datetime(2027, 3, 4, 12, 30, tzinfo=UTC)
    assert first.ends_at == datetime(2027, 3, 4, 21, 10, tzinfo=UTC)
    assert back.summary == "Flight LH401 JFK → FRA"  # the number already names the airline
    assert "Booking: RXJ34P" in describe(first.source)


def test_hotel_microdata_is_an_all_day_stay() -> None:
    """Nested microdata (reservationFor, address, underName) gives an all-day stay."""
    (stay,) = events_of(sample("hotel"))
    assert stay.kind == "LodgingReservation"
    assert stay.summary == "Stay at Hotel Adlon Kempinski"
    assert stay.location == "Hotel Adlon Kempinski, Unter den Linden 77, 10117, Berlin, DE"
    assert stay.all_day and stay.tzid is None
    assert (stay.starts_at.date().isoformat(), stay.ends_at.date().isoformat()) == (  # type: ignore[union-attr]
        "2027-05-20",
        "2027-05-23",
    )
    assert "Name: Jonas Weber" in describe(stay.source)


def test_concert_graph_and_repeated_microdata_give_one_event() -> None:
    """An @graph EventReservation repeated as microdata is one event, with its seat."""
    (concert,) = events_of(sample("concert"))
    assert concert.kind == "EventReservation"
    assert concert.summary == "Nick Cave & The Bad Seeds — Wild God Tour"
    assert concert.location is not None and concert.location.startswith("Royal Arena, ")
    assert concert.starts_at == datetime(2027, 10, 2, 18, 0, tzinfo=UTC)
    assert "Seat: section 103 row K seat 12" in describe(concert.source)


def test_parcel_delivery_window_and_address() -> None:
    """A ParcelDelivery gives its delivery window, the item and carrier, and the address."""
    (parcel,) = events_of(sample("parcel"))
    assert parcel.summary == "Delivery: Kindle Paperwhite (16 GB) (Royal Mail)"
    assert parcel.location == "Sam Jones, 24 Willow Road, M14 5TQ, Manchester, GB"
    assert parcel.starts_at == datetime(2027, 2, 8, 9, 0, tzinfo=UTC)
    assert "JD014600003828372938" in describe(parcel.source)


def test_wall_time_without_offset_is_read_in_the_owners_zone() -> None:
    """A start without an offset is a wall time in the owner's zone, kept as the event's TZID."""
    html = (
        '<script type="application/ld+json">{"@type": "TheaterEvent", "name": "Faust",'
        ' "startDate": "2027-07-01T19:30"}</script>'
    )
    (event,) = events_of(html, "Europe/Berlin")
    assert event.tzid == "Europe/Berlin"
    assert event.starts_at == datetime(2027, 7, 1, 17, 30, tzinfo=UTC)


def test_an_events_last_date_is_inclusive() -> None:
    """A festival from the 14th to the 16th covers the 16th (exclusive end on the 17th)."""
    html = (
        '<script type="application/ld+json">{"@type": "Festival", "name": "Fest",'
        ' "startDate": "2027-08-14", "endDate": "2027-08-16"}</script>'
    )
    (event,) = events_of(html)
    assert event.all_day
    assert event.ends_at == datetime(2027, 8, 17, tzinfo=UTC)


@pytest.mark.parametrize(
    "html",
    [
        '<script type="application/ld+json">{"@type": "Event", "name": </script>',  # cut JSON
        '<script type="application/ld+json">' + "[" * 100_000 + "]" * 100_000 + "</script>",
        '<script type="application/ld+json">{"@type": 5, "name": {"x": []}}</script>',
        '<script type="application/ld+json">{"@type": "Event", "name": "x",'
        ' "startDate": "99999-01-01T00:00"}</script>',  # no such date
        '<script type="application/ld+json">{"@type": "Event", "name": "x",'
        ' "startDate": ["", null, {"@value": "nonsense"}]}</script>',
        '<script type="application/ld+json">{"@type": "FlightReservation",'
        ' "reservationFor": "not an object"}</script>',
        '<script type="application/ld+json">NaN</script>',
        "<div itemscope itemtype=x>" * 5_000 + "<span itemprop=name>deep",  # nesting, unclosed
        "<div itemscope itemtype='https://schema.org/Event'><span itemprop=startDate>"
        "</div></span></p></td><<>>&#xffffffff;",
        "\x00<scr\x00ipt type=application/ld+json>{}</script>" + "<" * 10_000,
        "<div itemscope>" + "<div><b itemprop=name>x" * 60_000,  # many open elements
    ],
)
def test_hostile_html_gives_no_event_and_never_raises(html: str) -> None:
    """Broken, deep, mistyped or absurd structured data yields nothing and never raises."""
    assert events_of(html) == []


def test_script_in_a_summary_stays_text() -> None:
    """Markup inside a JSON-LD name is kept as text (the feed and pages escape it)."""
    html = (
        '<script type="application/ld+json">{"@type": "Event",'
        ' "name": "<img src=x onerror=alert(1)>", "startDate": "2027-01-01T10:00:00Z"}</script>'
    )
    (event,) = events_of(html)
    assert event.summary == "<img src=x onerror=alert(1)>"


def test_items_per_message_are_bounded() -> None:
    """A message with thousands of items gives at most MAX_ITEMS of them."""
    one = '{"@type": "Event", "name": "E%d", "startDate": "2027-01-01T10:%02d:00Z"}'
    body = ",".join(one % (i, i % 60) for i in range(3_000))
    html = f'<script type="application/ld+json">[{body}]</script>'
    assert len(structured_items(html)) == MAX_ITEMS


def test_kinds_by_type_url_and_subtype() -> None:
    """Types are read from URLs, prefixes and lists; any *Event subtype is an Event."""
    assert kind_of({"@type": "http://schema.org/FlightReservation"}) == "FlightReservation"
    assert kind_of({"@type": ["Thing", "schema:SportsEvent"]}) == "Event"
    assert kind_of({"@type": "Organization"}) is None
    assert kind_of("Event") is None
