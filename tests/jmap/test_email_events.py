"""The Email property ``events`` of ``urn:mailroom:jmap:events`` over real HTTP (both stores)."""

from __future__ import annotations

from mailroom.events.extract import extract_events
from mailroom.store.engine import Store
from tests.events.support import sample_mail
from tests.helpers import ingest
from tests.jmap.conftest import USING, Jmap, Person, email_id

EVENTS = "urn:mailroom:jmap:events"


def stored_flight(store: Store, alice: Person) -> str:
    """Alice's airline mail, its events extracted; its Email id."""
    result = ingest(
        store, (alice.user_id, alice.account_id, alice.inbox), [("air", sample_mail("airline"))]
    )
    extract_events(store, result.created_ids)
    return email_id(result.created_ids[0])


def test_events_are_given_to_clients_that_ask(store: Store, client: Jmap, alice: Person) -> None:
    """With the capability, ``events`` holds JSCalendar-like flights; mail without any has []."""
    flight = stored_flight(store, alice)
    plain = email_id(alice.messages["hello"])
    answer = client.call(
        "Email/get", {"ids": [flight, plain], "properties": ["id", "events"]}, [*USING, EVENTS]
    )
    by_id = {email["id"]: email for email in answer["list"]}
    assert by_id[plain]["events"] == []
    out, back = by_id[flight]["events"]
    assert out["@type"] == "Event" and out["kind"] == "FlightReservation"
    assert out["title"] == "Flight LH 400 FRA → JFK"
    assert (out["start"], out["timeZone"], out["duration"]) == (
        "2027-03-04T12:30:00",
        "Etc/UTC",
        "PT8H40M",
    )
    assert out["utcStart"] == "2027-03-04T12:30:00Z"
    assert out["locations"]["1"]["name"] == "Frankfurt Airport (FRA)"
    assert out["source"]["reservationNumber"] == "RXJ34P"
    assert back["uid"] != out["uid"]
    assert EVENTS in client.session["capabilities"]


def test_plain_rfc_8621_clients_see_no_events(store: Store, client: Jmap, alice: Person) -> None:
    """Without the capability ``events`` is an unknown property and never a default one."""
    flight = stored_flight(store, alice)
    default = client.call("Email/get", {"ids": [flight]})
    assert "events" not in default["list"][0]
    with_capability = client.call("Email/get", {"ids": [flight]}, [*USING, EVENTS])
    assert "events" not in with_capability["list"][0]
    refused = client.call("Email/get", {"ids": [flight], "properties": ["id", "events"]})
    assert refused["error"]["type"] == "invalidArguments"


def test_found_events_move_the_email_state(store: Store, client: Jmap, alice: Person) -> None:
    """Emails that gained events are 'updated' in Email/changes; a rerun moves nothing."""
    result = ingest(
        store, (alice.user_id, alice.account_id, alice.inbox), [("air", sample_mail("airline"))]
    )
    before = client.state("Email")
    extract_events(store, result.created_ids)
    changes = client.call("Email/changes", {"sinceState": before})
    assert changes["updated"] == [email_id(result.created_ids[0])]
    after = client.state("Email")
    extract_events(store, result.created_ids)
    assert client.state("Email") == after
