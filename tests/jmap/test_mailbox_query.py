"""Mailbox/query and Mailbox/queryChanges over real HTTP (RFC 8621 §2.3–2.4, RFC 8620 §5.6)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.jmap.conftest import CORE, Jmap, Person, apply_query_changes


def tree(client: Jmap) -> dict[str, str]:
    """Create Work (order 2) > Invoices, Work > Archive 2024, Home (order 1), Zoo (unsubscribed)."""
    result = client.call(
        "Mailbox/set",
        {
            "create": {
                "work": {"name": "Work", "sortOrder": 2},
                "invoices": {"name": "Invoices", "parentId": "#work", "sortOrder": 1},
                "old": {"name": "archive 2024", "parentId": "#work", "sortOrder": 1},
                "home": {"name": "Home", "sortOrder": 1},
                "zoo": {"name": "Zoo", "isSubscribed": False, "sortOrder": 1},
            }
        },
    )
    return {key: value["id"] for key, value in result["created"].items()}


def query(client: Jmap, **args: Any) -> Any:
    """Mailbox/query; the ids or the error."""
    result = client.call("Mailbox/query", args)
    return result.get("ids", result.get("error"))


def test_every_filter_condition(client: Jmap, alice: Person) -> None:
    """parentId (null too), name, role (null too), hasAnyRole and isSubscribed each filter."""
    box = tree(client)
    inbox = f"L{alice.inbox}"
    assert set(query(client, filter={"parentId": box["work"]})) == {box["invoices"], box["old"]}
    top = query(client, filter={"parentId": None})
    assert box["work"] in top and inbox in top and box["invoices"] not in top
    assert set(query(client, filter={"name": "ARCHIVE"})) >= {box["old"]}
    assert query(client, filter={"role": "inbox"}) == [inbox]
    assert set(query(client, filter={"role": None})) == set(box.values())
    assert set(query(client, filter={"hasAnyRole": False})) == set(box.values())
    assert inbox in query(client, filter={"hasAnyRole": True})
    assert query(client, filter={"isSubscribed": False}) == [box["zoo"]]
    junk = query(client, filter={"role": "junk"})
    assert len(junk) == 1 and junk[0] not in box.values()
    assert query(client, filter={"role": "important"}) == []


def test_filter_operators(client: Jmap) -> None:
    """AND, OR and NOT combine conditions."""
    box = tree(client)
    both = {"operator": "AND", "conditions": [{"parentId": box["work"]}, {"name": "inv"}]}
    assert query(client, filter=both) == [box["invoices"]]
    either = {"operator": "OR", "conditions": [{"name": "zoo"}, {"name": "home"}]}
    assert set(query(client, filter=either)) == {box["zoo"], box["home"]}
    neither = {"operator": "NOT", "conditions": [{"hasAnyRole": True}, {"parentId": None}]}
    assert set(query(client, filter=neither)) == {box["invoices"], box["old"]}


@pytest.mark.parametrize(
    ("filter_", "error"),
    [
        ({"colour": "red"}, "unsupportedFilter"),
        ({"name": 3}, "invalidArguments"),
        ({"hasAnyRole": "yes"}, "invalidArguments"),
        ({"isSubscribed": None}, "invalidArguments"),
        ({"parentId": 7}, "invalidArguments"),
        ({"operator": "XOR", "conditions": []}, "invalidArguments"),
        ({"operator": "AND"}, "invalidArguments"),
        ([], "invalidArguments"),
    ],
)
def test_bad_filters(client: Jmap, filter_: Any, error: str) -> None:
    """A malformed filter is invalidArguments; an unknown condition is unsupportedFilter."""
    assert query(client, filter=filter_)["type"] == error


def test_sorts(client: Jmap, alice: Person) -> None:
    """sortOrder then name, name descending; ties keep Inbox first; unknown sorts refused."""
    box = tree(client)
    ordered = query(client, filter={"role": None}, sort=[{"property": "sortOrder"}])
    # order 1: Home, Invoices, archive 2024, Zoo (ties by name); order 2: Work
    assert ordered == [box["old"], box["home"], box["invoices"], box["zoo"], box["work"]]
    by_name = query(
        client, filter={"role": None}, sort=[{"property": "name", "isAscending": False}]
    )
    assert by_name == [box["zoo"], box["work"], box["invoices"], box["home"], box["old"]]
    assert query(client)[0] == f"L{alice.inbox}"
    assert query(client, sort=[{"property": "totalEmails"}])["type"] == "unsupportedSort"
    collated = query(client, sort=[{"property": "name", "collation": "i;klingon"}])
    assert collated["type"] == "unsupportedSort"
    assert query(client, sort=[{"property": "name", "collation": 7}])["type"] == (
        "invalidArguments"
    )
    assert query(client, sort=[{"property": "name", "isAscending": 1}])["type"] == (
        "invalidArguments"
    )
    lenient = [{"property": "name", "isAscending": False, "anchorOffset": 0}]
    assert query(client, filter={"role": None}, sort=lenient) == by_name  # as jmapc sends it


def test_every_advertised_collation_orders_names(client: Jmap) -> None:
    """i;ascii-casemap folds only A-Z, i;octet folds nothing, i;unicode-casemap (default) all."""
    made = client.call(
        "Mailbox/set",
        {"create": {name: {"name": name} for name in ("apple", "Banana", "\u00e4pfel")}},
    )["created"]
    box = {key: value["id"] for key, value in made.items()}
    orders = {
        "i;ascii-casemap": ["apple", "Banana", "\u00e4pfel"],
        "i;octet": ["Banana", "apple", "\u00e4pfel"],
        "i;unicode-casemap": ["apple", "\u00e4pfel", "Banana"],
    }
    assert sorted(orders) == sorted(client.session["capabilities"][CORE]["collationAlgorithms"])
    for collation, names in orders.items():
        sort = [{"property": "name", "collation": collation}]
        assert query(client, filter={"role": None}, sort=sort) == [box[n] for n in names]
    default = query(client, filter={"role": None}, sort=[{"property": "name"}])
    assert default == [box[n] for n in orders["i;unicode-casemap"]]


def test_sort_as_tree_and_filter_as_tree(client: Jmap) -> None:
    """sortAsTree puts parents before children; filterAsTree drops those with a missing parent."""
    box = tree(client)
    as_tree = query(
        client,
        filter={"role": None},
        sort=[{"property": "sortOrder"}, {"property": "name"}],
        sortAsTree=True,
    )
    assert as_tree == [box["home"], box["zoo"], box["work"], box["old"], box["invoices"]]
    pruned = {"name": "i"}  # Invoices matches, Work does not
    assert box["invoices"] in query(client, filter=pruned)
    assert box["invoices"] not in query(client, filter=pruned, filterAsTree=True)
    kept = {"operator": "OR", "conditions": [{"name": "work"}, {"name": "inv"}]}
    assert query(client, filter=kept, filterAsTree=True, sortAsTree=True) == [
        box["work"],
        box["invoices"],
    ]


def test_position_anchor_limit_and_total(client: Jmap) -> None:
    """position (negative too), anchor with offset, limit and calculateTotal."""
    tree(client)
    every = query(client)
    result = client.call("Mailbox/query", {"position": -2, "calculateTotal": True})
    assert result["ids"] == every[-2:] and result["total"] == len(every)
    anchored = client.call("Mailbox/query", {"anchor": every[3], "anchorOffset": -1, "limit": 2})
    assert anchored["ids"] == every[2:4] and anchored["position"] == 2
    assert query(client, anchor="L999999")["type"] == "anchorNotFound"
    assert client.call("Mailbox/query", {})["canCalculateChanges"] is True


@pytest.mark.parametrize("as_tree", [False, True])
def test_query_changes_bring_a_cached_list_up_to_date(client: Jmap, as_tree: bool) -> None:
    """Removed and added turn the old results into the new ones after renames, moves, destroys."""
    box = tree(client)
    args: dict[str, Any] = {"sort": [{"property": "name"}], "sortAsTree": as_tree}
    before = client.call("Mailbox/query", args)
    client.call(
        "Mailbox/set",
        {
            "create": {"new": {"name": "Aardvark"}},
            "update": {
                box["work"]: {"name": "Boulot"},
                box["zoo"]: {"parentId": box["home"]},
                box["home"]: {"sortOrder": 9},
            },
            "destroy": [box["old"]],
        },
    )
    changes = client.call(
        "Mailbox/queryChanges",
        {**args, "sinceQueryState": before["queryState"], "calculateTotal": True},
    )
    after = client.call("Mailbox/query", args)
    assert changes["oldQueryState"] == before["queryState"]
    assert changes["newQueryState"] == after["queryState"]
    assert apply_query_changes(before["ids"], changes) == after["ids"]
    assert changes["total"] == len(after["ids"])
    assert box["old"] in changes["removed"]


def test_query_changes_limits_and_states(client: Jmap) -> None:
    """maxChanges is tooManyChanges when exceeded; an unknown state cannotCalculateChanges."""
    state = client.call("Mailbox/query", {})["queryState"]
    tree(client)
    many = client.call("Mailbox/queryChanges", {"sinceQueryState": state, "maxChanges": 1})
    assert many["error"]["type"] == "tooManyChanges"
    bad = client.call("Mailbox/queryChanges", {"sinceQueryState": "x"})
    assert bad["error"]["type"] == "cannotCalculateChanges"
    same = client.call("Mailbox/query", {})
    none = client.call("Mailbox/queryChanges", {"sinceQueryState": same["queryState"]})
    assert none["removed"] == [] and none["added"] == []
