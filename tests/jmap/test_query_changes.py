"""Email/queryChanges over HTTP (RFC 8620 §5.6): upToId on immutable and mutable
queries, other sorts, totals, and the errors."""

from __future__ import annotations

from typing import Any

from mailroom.store.engine import Store
from tests.factories import make_message
from tests.helpers import ingest
from tests.jmap.conftest import Jmap, Person, apply_query_changes, email_id, email_query

OLDEST_FIRST = [{"property": "receivedAt"}]
IMMUTABLE = {"filter": {"hasAttachment": False}, "sort": OLDEST_FIRST}


def changes(client: Jmap, **args: Any) -> dict[str, Any]:
    """Email/queryChanges; fails the test on a method error."""
    result: dict[str, Any] = client.call("Email/queryChanges", args)
    assert "error" not in result, result
    return result


def arrive(store: Store, person: Person, *minutes: int) -> list[str]:
    """New emails (each its own thread) received at these minutes; their ids."""
    raws = [
        (f"late-{m}", make_message(f"late-{m}@x", subject=f"Note {m}", minutes=m)) for m in minutes
    ]
    result = ingest(store, (person.user_id, person.account_id, person.inbox), raws)
    return [email_id(i) for i in sorted(result.created_ids)]


def test_up_to_id_stops_an_immutable_query_at_the_clients_last_id(
    store: Store, client: Jmap, alice: Person
) -> None:
    """Only additions up to upToId are reported; without it, all of them."""
    before = email_query(client, **IMMUTABLE)
    hello, reply, other = before["ids"]
    early, late = arrive(store, alice, 2, 100)
    args = {**IMMUTABLE, "sinceQueryState": before["queryState"], "calculateTotal": True}
    short = changes(client, **args, upToId=reply)
    assert short["added"] == [{"id": early, "index": 1}]
    assert short["total"] == 5
    assert apply_query_changes([hello, reply], short) == [hello, early, reply]
    full = changes(client, **args)
    assert full["added"] == [{"id": early, "index": 1}, {"id": late, "index": 4}]
    after = email_query(client, **IMMUTABLE)
    rebuilt = apply_query_changes(before["ids"], full)
    assert rebuilt == after["ids"] == [hello, early, reply, other, late]
    assert full["newQueryState"] == after["queryState"] and full["total"] == 5


def test_up_to_id_is_ignored_where_it_cannot_be_honest(
    store: Store, client: Jmap, alice: Person
) -> None:
    """A mutable filter, or an upToId that changed itself, reports every addition."""
    mutable = {"filter": {"inMailbox": f"L{alice.inbox}"}, "sort": OLDEST_FIRST}
    before_mutable = email_query(client, **mutable)
    before = email_query(client, **IMMUTABLE)
    hello, reply, _other = before["ids"]
    (late,) = arrive(store, alice, 100)
    moved = changes(
        client,
        **mutable,
        sinceQueryState=before_mutable["queryState"],
        upToId=before_mutable["ids"][0],
    )
    assert {"id": late, "index": 3} in moved["added"]  # before the report of 12:00
    client.call("Email/set", {"destroy": [reply]})
    gone = changes(client, **IMMUTABLE, sinceQueryState=before["queryState"], upToId=reply)
    assert reply in gone["removed"]
    assert {"id": late, "index": 2} in gone["added"]
    assert apply_query_changes(before["ids"], gone) == email_query(client, **IMMUTABLE)["ids"]
    assert hello in email_query(client, **IMMUTABLE)["ids"]


def test_changes_follow_a_subject_sort_with_collapsed_threads(
    store: Store, client: Jmap, alice: Person
) -> None:
    """Applying the delta to the old ids gives the new ids under any sort."""
    args = {"sort": [{"property": "subject"}], "collapseThreads": True}
    before = email_query(client, **args)
    arrive(store, alice, 1, 200)
    client.call(
        "Email/set", {"update": {email_id(alice.messages["other"]): {"keywords/$seen": True}}}
    )
    delta = changes(client, **args, sinceQueryState=before["queryState"], calculateTotal=True)
    after = email_query(client, **args)
    assert apply_query_changes(before["ids"], delta) == after["ids"]
    assert delta["total"] == len(after["ids"]) == 5
    same = changes(client, **args, sinceQueryState=after["queryState"])
    assert same["removed"] == [] and same["added"] == []
    assert same["oldQueryState"] == same["newQueryState"] == after["queryState"]


def test_query_changes_errors(store: Store, client: Jmap, alice: Person) -> None:
    """Unknown states, too many changes and malformed arguments are their RFC errors."""
    state = email_query(client)["queryState"]
    arrive(store, alice, 100, 101)

    def error(**args: Any) -> str:
        result = client.call("Email/queryChanges", args)
        assert "error" in result, result
        kind: str = result["error"]["type"]
        return kind

    assert error() == "invalidArguments"
    assert error(sinceQueryState=7) == "invalidArguments"
    assert error(sinceQueryState="not-a-state") == "cannotCalculateChanges"
    assert error(sinceQueryState="99999999999") == "cannotCalculateChanges"
    assert error(sinceQueryState=state, maxChanges=1) == "tooManyChanges"
    assert error(sinceQueryState=state, maxChanges=0) == "invalidArguments"
    assert error(sinceQueryState=state, upToId=5) == "invalidArguments"
    assert error(sinceQueryState=state, sort=[{"property": "preview"}]) == "unsupportedSort"
    assert error(sinceQueryState=state, filter={"nope": 1}) == "unsupportedFilter"
    assert changes(client, sinceQueryState=state, maxChanges=4)["added"]
