"""The events feed over real HTTP, read by the icalendar parser, and its address (both stores)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, date, datetime

import httpx
import icalendar
import pytest
from click.testing import CliRunner
from sqlalchemy import select

from mailroom.cli.main import cli
from mailroom.events.extract import extract_events
from mailroom.store.engine import Store
from mailroom.store.models import Label, MessageLabel, User
from tests.events.support import store_samples
from tests.factories import make_message
from tests.helpers import ingest
from tests.web.conftest import add_user, browser, csrf_of, sign_in

THEATRE = (
    '<html><body><script type="application/ld+json">{"@type": "TheaterEvent",'
    ' "name": "Faust; Part One, \\"new\\" staging", "startDate": "2027-07-01T19:30",'
    ' "endDate": "2027-07-01T22:45",'
    ' "location": {"@type": "Place", "name": "Deutsches Theater, Kammerspiele"}}'
    "</script><p>Your tickets</p></body></html>"
)


@pytest.fixture
def mailbox(store: Store) -> dict[str, int]:
    """``me`` (zone Europe/Berlin) with the samples' events; the parcel mail is in Spam."""
    account, ids = store_samples(store)
    add_user(store, "me")
    extra = ingest(store, account, [("theatre", make_message("t@x", html=THEATRE, minutes=30))])
    ids["theatre"] = extra.created_ids[0]
    with store.session() as session:
        user = session.get(User, account[0])
        assert user is not None
        user.settings = {**user.settings, "timezone": "Europe/Berlin"}
        spam = session.scalar(
            select(Label.id).where(Label.user_id == user.id, Label.role == "spam")
        )
        session.add(MessageLabel(message_id=ids["parcel"], label_id=spam))
    extract_events(store, list(ids.values()))
    return ids


@pytest.fixture
def me(server: str, mailbox: dict[str, int]) -> Iterator[tuple[httpx.Client, str]]:
    """A browser signed in as ``me`` and its CSRF token."""
    with browser(server) as client:
        assert sign_in(client, server, "me").status_code == 303
        yield client, csrf_of(client.get("/").text)


def new_address(client: httpx.Client, csrf: str) -> str:
    """Make a feed address on the settings page; the URL shown once."""
    answer = client.post("/settings/calendar", data={"csrf": csrf})
    assert answer.status_code == 200, answer.text
    found = re.search(r'id="calendar-url">([^<]+)<', answer.text)
    assert found is not None
    return found.group(1)


def test_feed_parses_and_holds_the_events(me: tuple[httpx.Client, str]) -> None:
    """The feed is RFC 5545 text/calendar: folded lines, UTC, TZID and all-day times, no spam."""
    url = new_address(*me)
    answer = httpx.get(url)  # a calendar program: no cookie
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/calendar")
    assert all(len(line) <= 75 for line in answer.content.split(b"\r\n"))
    calendar = icalendar.Calendar.from_ical(answer.content)
    events = {str(e["summary"]): e for e in calendar.walk("VEVENT")}
    assert set(events) == {
        "Flight LH 400 FRA → JFK",
        "Flight LH401 JFK → FRA",
        "Stay at Hotel Adlon Kempinski",
        "Nick Cave & The Bad Seeds — Wild God Tour",
        'Faust; Part One, "new" staging',
    }  # the parcel's mail is in Spam
    flight = events["Flight LH 400 FRA → JFK"]
    assert flight.decoded("dtstart") == datetime(2027, 3, 4, 12, 30, tzinfo=UTC)
    assert flight.decoded("dtend") == datetime(2027, 3, 4, 21, 10, tzinfo=UTC)
    assert "Booking: RXJ34P" in str(flight["description"])
    stay = events["Stay at Hotel Adlon Kempinski"]
    assert (stay.decoded("dtstart"), stay.decoded("dtend")) == (
        date(2027, 5, 20),
        date(2027, 5, 23),
    )
    play = events['Faust; Part One, "new" staging']
    assert play["dtstart"].params["TZID"] == "Europe/Berlin"
    assert play.decoded("dtstart").replace(tzinfo=None) == datetime(2027, 7, 1, 19, 30)
    assert str(play["location"]) == "Deutsches Theater, Kammerspiele"
    assert b"Deutsches Theater\\, Kammerspiele" in answer.content  # RFC 5545 escaping
    assert [tz["tzid"] for tz in calendar.walk("VTIMEZONE")] == ["Europe/Berlin"]
    uids = sorted(str(e["uid"]) for e in events.values())
    again = icalendar.Calendar.from_ical(httpx.get(url).content)
    assert sorted(str(e["uid"]) for e in again.walk("VEVENT")) == uids  # stable UIDs
    assert all("dtstamp" in e for e in events.values())


def test_a_new_address_replaces_the_old_and_off_ends_it(me: tuple[httpx.Client, str]) -> None:
    """Rotating makes the old address 404; switching off makes every address 404."""
    client, csrf = me
    assert "The feed is off." in client.get("/settings").text
    old = new_address(client, csrf)
    new = new_address(client, csrf)
    assert httpx.get(old).status_code == 404
    assert httpx.get(new).status_code == 200
    assert "The feed is on" in client.get("/settings").text
    assert client.post("/settings/calendar", data={"csrf": "forged"}).status_code == 403
    off = client.post("/settings/calendar/off", data={"csrf": csrf})
    assert off.status_code == 303
    assert "The calendar feed is off" in client.get(off.headers["location"]).text
    assert httpx.get(new).status_code == 404


@pytest.mark.parametrize("token", ["nope", "cal_" + "x" * 200, "cal_%00", "../settings"])
def test_unknown_tokens_get_a_plain_404(server: str, mailbox: dict[str, int], token: str) -> None:
    """Any token that is not a live feed's answers 404 and names no user."""
    answer = httpx.get(f"{server}/calendar/{token}.ics")
    assert answer.status_code == 404
    assert "me" not in answer.text


def test_the_cli_prints_a_working_address(
    store: Store, server: str, mailbox: dict[str, int]
) -> None:
    """`mailroom calendar url me --base-url` prints an address whose feed answers."""
    url = store.engine.url.render_as_string(hide_password=False)
    where = ["--data-dir", str(store.data_dir)] if store.data_dir else []
    result = CliRunner().invoke(
        cli,
        [*where, "--database-url", url, "calendar", "url", "me", "--base-url", server + "/"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    address = result.output.strip()
    assert address.startswith(f"{server}/calendar/cal_") and address.endswith(".ics")
    assert len(icalendar.Calendar.from_ical(httpx.get(address).content).walk("VEVENT")) == 5


def test_the_thread_page_lists_a_messages_events(
    store: Store, mailbox: dict[str, int], me: tuple[httpx.Client, str]
) -> None:
    """A conversation shows each message's events: title, time in the owner's zone, place."""
    from mailroom.store.models import Message

    client, _ = me
    with store.session() as session:
        threads = {
            name: session.scalar(select(Message.thread_id).where(Message.id == mid))
            for name, mid in mailbox.items()
        }
    flight = client.get(f"/threads/{threads['airline']}").text
    assert "<strong>Flight LH 400 FRA → JFK</strong> — " in flight
    assert "2027-03-04 13:30 CET – 22:10" in flight  # Europe/Berlin
    assert "Frankfurt Airport (FRA)" in flight
    stay = client.get(f"/threads/{threads['hotel']}").text
    assert "2027-05-20 – 2027-05-23" in stay  # check-in to check-out
    assert (
        'aria-label="Events in this message"' not in client.get(f"/threads/{threads['plain']}").text
    )
