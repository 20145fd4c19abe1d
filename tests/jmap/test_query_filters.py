"""Email/query filter conditions over HTTP beyond the basics of test_query.py: header,
body against text, tokens and quoted phrases, stored keywords, sizes and dates at their
bounds, and the filter errors."""

from __future__ import annotations

from typing import Any

import pytest

from mailroom.store.engine import Store
from mailroom.store.models import MessageKeyword
from tests.factories import make_message
from tests.helpers import ingest
from tests.jmap.conftest import Jmap, Person, email_id


def found(client: Jmap, condition: Any) -> set[str]:
    """The ids matching a filter; fails the test on a method error."""
    result = client.call("Email/query", {"filter": condition})
    assert "error" not in result, result
    return set(result["ids"])


def ids(person: Person, *keys: str) -> set[str]:
    """Email ids of seeded messages."""
    return {email_id(person.messages[key]) for key in keys}


@pytest.fixture
def listed(store: Store, alice: Person) -> str:
    """An email with list headers and an encoded, non-ASCII header value."""
    raw = make_message(
        "listed@x",
        subject="Weekly digest",
        headers={
            "List-Id": "Walrus Fans <walrus.lists.example>",
            "X-Note": "=?utf-8?q?Gr=C3=BC=C3=9Fe_aus_K=C3=B6ln?=",
        },
        minutes=30,
    )
    result = ingest(store, (alice.user_id, alice.account_id, alice.inbox), [("listed", raw)])
    return email_id(result.created_ids[0])


def test_header_by_name_and_by_value(client: Jmap, alice: Person, listed: str) -> None:
    """[name] needs the field; [name, text] a value holding every token (any case)."""
    assert found(client, {"header": ["list-id"]}) == {listed}
    assert found(client, {"header": ["LIST-ID", "walrus fans"]}) == {listed}
    assert found(client, {"header": ["List-Id", "fans walrus"]}) == {listed}  # tokens, any order
    assert found(client, {"header": ["List-Id", '"fans walrus"']}) == set()  # a phrase
    assert found(client, {"header": ["List-Id", "lists.example"]}) == {listed}
    assert found(client, {"header": ["List-Id", "cats"]}) == set()
    assert found(client, {"header": ["X-Note", "grüße aus"]}) == {listed}  # decoded words
    assert found(client, {"header": ["X-Missing"]}) == set()
    assert found(client, {"header": ["Message-ID", "reply@x"]}) == ids(alice, "reply")
    assert found(client, {"header": ["In-Reply-To"]}) == ids(alice, "reply")
    assert found(client, {"header": ["Subject", "100%"]}) == set()  # % is no wildcard
    negated = {"operator": "NOT", "conditions": [{"header": ["List-Id"]}]}
    assert listed not in found(client, negated) and len(found(client, negated)) == 4


@pytest.mark.parametrize(
    "value", [[], ["a", "b", "c"], "List-Id", [""], ["List-Id", 3], [None], {"name": "x"}]
)
def test_header_shapes_that_are_invalid(client: Jmap, value: Any) -> None:
    """header is [name] or [name, text] of strings; anything else is invalidArguments."""
    result = client.call("Email/query", {"filter": {"header": value}})
    assert result["error"]["type"] == "invalidArguments", result


def test_body_searches_only_bodies_and_text_everything(client: Jmap, alice: Person) -> None:
    """body finds words of the body only; text also subject and addresses."""
    assert found(client, {"body": "walrus"}) == ids(alice, "reply")  # hello has it in its subject
    assert found(client, {"text": "walrus"}) == ids(alice, "hello", "reply")
    assert found(client, {"body": "bob"}) == set()
    not_text = {"operator": "NOT", "conditions": [{"text": "walrus"}, {"body": "numbers"}]}
    assert found(client, not_text) == ids(alice, "other")
    assert found(client, {"text": "bob"}) == ids(alice, "hello", "reply", "other")  # To: Bob


def test_tokens_and_phrases(client: Jmap, alice: Person) -> None:
    """Every token must occur; quoted text is one phrase (RFC 8621 §4.4.1)."""
    assert found(client, {"subject": "walrus hello"}) == ids(alice, "hello", "reply")
    assert found(client, {"subject": '"walrus hello"'}) == set()
    assert found(client, {"subject": "'hello walrus'"}) == ids(alice, "hello", "reply")
    assert found(client, {"text": '"walrus is well"'}) == ids(alice, "reply")
    assert found(client, {"text": '"well is walrus"'}) == set()
    assert found(client, {"body": "well walrus"}) == ids(alice, "reply")
    assert found(client, {"from": "bob example.net"}) == ids(alice, "reply")
    assert found(client, {"to": "alice example.org"}) == ids(alice, "reply", "report")
    assert found(client, {"subject": ""}) == ids(alice, "hello", "reply", "other", "report")


def test_stored_keywords(store: Store, client: Jmap, alice: Person) -> None:
    """Keywords other than $seen and $flagged are message_keywords rows, matched lower-cased."""
    hello, reply, other = (alice.messages[k] for k in ("hello", "reply", "other"))
    with store.session() as session:
        session.add(MessageKeyword(message_id=hello, keyword="$answered"))
        session.add(MessageKeyword(message_id=other, keyword="$draft"))
        session.add(MessageKeyword(message_id=other, keyword="custom"))
    assert found(client, {"hasKeyword": "$Answered"}) == {email_id(hello)}
    assert found(client, {"hasKeyword": "$draft"}) == {email_id(other)}
    assert found(client, {"notKeyword": "custom"}) == ids(alice, "hello", "reply", "report")
    assert found(client, {"someInThreadHaveKeyword": "$answered"}) == {
        email_id(hello),
        email_id(reply),
    }
    assert found(client, {"noneInThreadHaveKeyword": "$answered"}) == ids(alice, "other", "report")
    assert found(client, {"allInThreadHaveKeyword": "custom"}) == {email_id(other)}


def test_sizes_and_dates_at_their_bounds(client: Jmap, alice: Person) -> None:
    """minSize is inclusive and maxSize exclusive; after is inclusive and before exclusive."""
    hello = ids(alice, "hello")
    (got,) = client.call("Email/get", {"ids": list(hello), "properties": ["size", "receivedAt"]})[
        "list"
    ]
    assert hello <= found(client, {"minSize": got["size"]})
    assert not hello & found(client, {"maxSize": got["size"]})
    assert hello <= found(client, {"maxSize": got["size"] + 1})
    assert hello <= found(client, {"after": got["receivedAt"]})
    assert not hello & found(client, {"before": got["receivedAt"]})
    window = {"after": got["receivedAt"], "before": "2024-03-01T09:05:00Z"}
    assert found(client, window) == hello


def test_in_mailbox_other_than(client: Jmap, alice: Person) -> None:
    """An email matches when one of its mailboxes is not in the list."""
    inbox = f"L{alice.inbox}"
    everything = ids(alice, "hello", "reply", "other", "report")
    assert found(client, {"inMailboxOtherThan": [inbox]}) == set()
    assert found(client, {"inMailboxOtherThan": []}) == everything
    assert found(client, {"inMailboxOtherThan": ["L999999"]}) == everything


@pytest.mark.parametrize(
    ("condition", "error"),
    [
        ({"subject": 7}, "invalidArguments"),
        ({"hasKeyword": ""}, "invalidArguments"),
        ({"hasKeyword": "two words"}, "invalidArguments"),
        ({"notKeyword": "bad(paren"}, "invalidArguments"),
        ({"minSize": -1}, "invalidArguments"),
        ({"before": "yesterday"}, "invalidArguments"),
        ({"hasAttachment": "yes"}, "invalidArguments"),
        ({"inMailboxOtherThan": "L1"}, "invalidArguments"),
        ({"operator": "XOR", "conditions": []}, "invalidArguments"),
        ({"operator": "AND"}, "invalidArguments"),
        ({"threadId": "T1"}, "unsupportedFilter"),
        ({"category": "promotions"}, "unsupportedFilter"),  # without the tabs capability
        ("walrus", "invalidArguments"),
    ],
)
def test_filter_errors(client: Jmap, condition: Any, error: str) -> None:
    """Each malformed or unsupported filter is its precise RFC 8620 error."""
    result = client.call("Email/query", {"filter": condition})
    assert result["error"]["type"] == error, result


def test_address_filters_with_non_ascii_and_wildcards(
    store: Store, client: Jmap, alice: Person
) -> None:
    """to/cc/bcc match decoded non-ASCII names and take % and _ literally."""
    raw = make_message("zoe@x", subject="Hi", to='"Zoë 100%" <zoe_z@x.example>', minutes=50)
    (created,) = ingest(
        store, (alice.user_id, alice.account_id, alice.inbox), [("zoe", raw)]
    ).created_ids
    zoe = {email_id(created)}
    assert found(client, {"to": "Zoë"}) == zoe
    assert found(client, {"to": "100%"}) == zoe
    assert found(client, {"to": "zoe_z"}) == zoe
    assert found(client, {"to": "1%0"}) == set()
    assert found(client, {"to": "zo_"}) == set()  # _ is no wildcard
