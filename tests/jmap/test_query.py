"""Email/query filters, sorting, collapsing, paging and totals; queryChanges; snippets."""

from __future__ import annotations

from typing import Any

from mailroom.store.engine import Store
from tests.factories import make_message
from tests.helpers import ingest
from tests.jmap.conftest import USING, Jmap, Person, email_id, email_query

TABS = "urn:mailroom:jmap:tabs"


def ids_for(client: Jmap, person: Person, *keys: str) -> list[str]:
    """Email ids of seeded messages, in the given order."""
    return [email_id(person.messages[key]) for key in keys]


def test_inbox_newest_first_collapsed_by_thread(client: Jmap, alice: Person) -> None:
    """The inbox lists the newest email per thread, newest first, with exact totals."""
    inbox = f"L{alice.inbox}"
    flat = email_query(client, filter={"inMailbox": inbox}, calculateTotal=True)
    assert flat["ids"] == ids_for(client, alice, "report", "other", "reply", "hello")
    assert flat["total"] == 4 and flat["position"] == 0 and flat["canCalculateChanges"]
    collapsed = email_query(
        client,
        filter={"inMailbox": inbox},
        sort=[{"property": "receivedAt", "isAscending": False}],
        collapseThreads=True,
        calculateTotal=True,
    )
    assert collapsed["ids"] == ids_for(client, alice, "report", "other", "reply")
    assert collapsed["total"] == 3
    oldest = email_query(
        client, sort=[{"property": "receivedAt", "isAscending": True}], collapseThreads=True
    )
    assert oldest["ids"] == ids_for(client, alice, "hello", "other", "report")


def test_position_anchor_and_limit(client: Jmap, alice: Person) -> None:
    """Paging by position (also negative) and by anchor with an offset."""
    everything = ids_for(client, alice, "report", "other", "reply", "hello")
    assert email_query(client, position=1, limit=2)["ids"] == everything[1:3]
    tail = email_query(client, position=-1, limit=5)
    assert tail["ids"] == everything[3:] and tail["position"] == 3
    assert email_query(client, position=10)["ids"] == []
    around = email_query(client, anchor=everything[2], anchorOffset=-1, limit=2)
    assert around["ids"] == everything[1:3] and around["position"] == 1
    collapsed = email_query(client, anchor=everything[2], collapseThreads=True, limit=1)
    assert collapsed["ids"] == [everything[2]] and collapsed["position"] == 2
    hidden = client.call("Email/query", {"anchor": everything[3], "collapseThreads": True})
    assert hidden["error"]["type"] == "anchorNotFound"
    capped = email_query(client)
    assert (
        capped["limit"]
        == client.session["capabilities"]["urn:ietf:params:jmap:core"]["maxObjectsInGet"]
    )


def test_filters(store: Store, client: Jmap, alice: Person) -> None:
    """Each supported condition, and AND/OR/NOT, select the right emails."""
    hello, reply, other, report = ids_for(client, alice, "hello", "reply", "other", "report")
    trash = next(
        m["id"] for m in client.call("Mailbox/get", {"ids": None})["list"] if m["role"] == "trash"
    )
    client.call(
        "Email/set",
        {
            "update": {
                hello: {"keywords/$seen": True},
                other: {"keywords/$flagged": True},
                reply: {f"mailboxIds/L{alice.inbox}": None, f"mailboxIds/{trash}": True},
            }
        },
    )

    def found(condition: dict[str, Any]) -> set[str]:
        return set(email_query(client, filter=condition)["ids"])

    assert found({"inMailbox": trash}) == {reply}
    assert found({"inMailboxOtherThan": [trash]}) == {hello, other, report}
    assert found({"hasKeyword": "$seen"}) == {hello}
    assert found({"notKeyword": "$seen"}) == {reply, other, report}
    assert found({"hasKeyword": "$flagged"}) == {other}
    assert found({"hasKeyword": "$answered"}) == set()
    assert found({"someInThreadHaveKeyword": "$seen"}) == {hello, reply}
    assert found({"allInThreadHaveKeyword": "$seen"}) == set()
    assert found({"noneInThreadHaveKeyword": "$seen"}) == {other, report}
    assert found({"from": "BOB@example"}) == {reply}
    assert found({"from": "carol reports"}) == {report}
    assert found({"to": "alice@example.org"}) == {reply, report}
    assert found({"cc": "dave"}) == {report}
    assert found({"bcc": "dave"}) == set()
    assert found({"subject": "walrus"}) == {hello, reply}
    assert found({"text": "walrus"}) == {hello, reply}
    assert found({"text": "numb"}) == {report}  # the last word also matches as a prefix
    assert found({"body": "well"}) == {reply}
    assert found({"hasAttachment": True}) == {report}
    assert found({"after": "2024-03-01T09:05:00Z"}) == {reply, other, report}
    assert found({"before": "2024-03-01T09:05:00Z"}) == {hello}
    assert found({"minSize": 10_000}) == set()
    assert found(
        {"operator": "OR", "conditions": [{"hasKeyword": "$seen"}, {"hasAttachment": True}]}
    ) == {  # noqa: E501
        hello,
        report,
    }
    assert found({"operator": "NOT", "conditions": [{"subject": "walrus"}]}) == {other, report}
    assert found(
        {"operator": "AND", "conditions": [{"subject": "walrus"}, {"inMailbox": trash}]}
    ) == {reply}  # noqa: E501
    assert found({"inMailbox": "nonsense"}) == set()


def test_tab_filter_with_the_mailroom_capability(store: Store, client: Jmap, alice: Person) -> None:
    """`category` filters by the thread's inbox tab, only when the tabs capability is used."""
    account = (alice.user_id, alice.account_id, alice.inbox)
    ingest(
        store,
        account,
        [
            (
                "promo",
                make_message(
                    "promo@shop.example",
                    sender="Shop <news@shop.example>",
                    subject="Big sale",
                    headers={"List-Unsubscribe": "<mailto:unsubscribe@shop.example>"},
                    minutes=50,
                ),
            )
        ],
    )
    using = [*USING, TABS]
    promotions = client.call("Email/query", {"filter": {"category": "promotions"}}, using=using)
    (promo,) = promotions["ids"]
    primary = client.call("Email/query", {"filter": {"category": "primary"}}, using=using)
    assert promo not in primary["ids"] and len(primary["ids"]) == 4
    shown = client.call("Email/get", {"ids": [promo], "properties": ["category"]}, using=using)
    assert shown["list"][0]["category"] == "promotions"
    assert client.call("Email/get", {"ids": [promo], "properties": ["category"]})["error"]


def test_query_changes_follow_a_move_out_of_the_inbox(client: Jmap, alice: Person) -> None:
    """After a move to Trash, queryChanges removes it and re-adds the new thread representative."""
    inbox = f"L{alice.inbox}"
    args = {"filter": {"inMailbox": inbox}, "collapseThreads": True}
    before = email_query(client, **args)
    reply, hello = ids_for(client, alice, "reply", "hello")
    trash = next(
        m["id"] for m in client.call("Mailbox/get", {"ids": None})["list"] if m["role"] == "trash"
    )
    client.call(
        "Email/set", {"update": {reply: {f"mailboxIds/{inbox}": None, f"mailboxIds/{trash}": True}}}
    )  # noqa: E501
    delta = client.call(
        "Email/queryChanges",
        {**args, "sinceQueryState": before["queryState"], "calculateTotal": True},
    )
    after = email_query(client, **args)
    assert delta["oldQueryState"] == before["queryState"]
    assert delta["newQueryState"] == after["queryState"] != before["queryState"]
    assert reply in delta["removed"]
    rebuilt = [i for i in before["ids"] if i not in set(delta["removed"])]
    for item in sorted(delta["added"], key=lambda a: a["index"]):
        rebuilt.insert(item["index"], item["id"])
    assert rebuilt == after["ids"] and hello in after["ids"]
    assert delta["total"] == len(after["ids"])
    unchanged = client.call("Email/queryChanges", {**args, "sinceQueryState": after["queryState"]})
    assert unchanged["removed"] == [] and unchanged["added"] == []
    too_many = client.call(
        "Email/queryChanges", {**args, "sinceQueryState": before["queryState"], "maxChanges": 1}
    )
    assert too_many["error"]["type"] == "tooManyChanges"


def test_search_snippets_mark_the_words(client: Jmap, alice: Person) -> None:
    """Snippets HTML-escape and <mark> the search words in subject and body; null elsewhere."""
    hello, reply, other = ids_for(client, alice, "hello", "reply", "other")
    result = client.call(
        "SearchSnippet/get", {"filter": {"text": "walrus"}, "emailIds": [hello, reply, other]}
    )
    snippets = {s["emailId"]: s for s in result["list"]}
    assert snippets[hello]["subject"] == "Hello <mark>walrus</mark>"
    assert snippets[reply]["preview"] == "The <mark>walrus</mark> is well."
    assert snippets[other] == {"emailId": other, "subject": None, "preview": None}


def test_mailbox_query_and_changes_of_counts(client: Jmap, alice: Person) -> None:
    """Mailbox/query finds by role and sorts inbox first; counts follow Email/set."""
    by_role = client.call("Mailbox/query", {"filter": {"role": "inbox"}})
    assert by_role["ids"] == [f"L{alice.inbox}"]
    ordered = client.call("Mailbox/query", {})["ids"]
    assert ordered[0] == f"L{alice.inbox}"
    assert client.call("Mailbox/query", {"filter": {"hasAnyRole": False}})["ids"] == []
    inbox = client.call("Mailbox/get", {"ids": [f"L{alice.inbox}"]})["list"][0]
    assert (inbox["totalEmails"], inbox["unreadEmails"]) == (4, 4)
    assert (inbox["totalThreads"], inbox["unreadThreads"]) == (3, 3)
    state = client.state("Mailbox")
    client.call(
        "Email/set", {"update": {email_id(alice.messages["other"]): {"keywords/$seen": True}}}
    )  # noqa: E501
    changed = client.call("Mailbox/changes", {"sinceState": state})
    assert f"L{alice.inbox}" in changed["updated"]
    inbox = client.call("Mailbox/get", {"ids": [f"L{alice.inbox}"]})["list"][0]
    assert (inbox["unreadEmails"], inbox["unreadThreads"]) == (3, 2)
    assert changed["newState"] == client.state("Mailbox")
