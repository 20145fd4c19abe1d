"""SearchSnippet/get over HTTP (RFC 8621 §5): what is marked where, escaping, the
255-octet preview, notFound and the filter errors."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest

from mailroom.store.engine import Store
from tests.factories import make_message
from tests.helpers import ingest
from tests.jmap.conftest import Jmap, Person, email_id


def snippets(client: Jmap, condition: Any, *email_ids: str) -> dict[str, dict[str, Any]]:
    """The snippets of these emails for a filter, by email id."""
    result = client.call("SearchSnippet/get", {"filter": condition, "emailIds": list(email_ids)})
    assert "error" not in result, result
    assert result["notFound"] == []
    return {s["emailId"]: s for s in result["list"]}


FANCY_BODY = "Ünïcödé wörds & <tags> " * 40 + "then the walrus arrives. " + "Ünïcödé " * 60


@pytest.fixture
def fancy(store: Store, alice: Person) -> str:
    """An email whose subject needs escaping and whose body is long and not ASCII."""
    raw = make_message(
        "fancy@x", subject='Fish & <chips> "for" walrus', body=FANCY_BODY, minutes=40
    )
    result = ingest(store, (alice.user_id, alice.account_id, alice.inbox), [("fancy", raw)])
    return email_id(result.created_ids[0])


def test_escaped_then_marked(client: Jmap, fancy: str) -> None:
    """&, < and > become entities; the match is wrapped in <mark> after escaping."""
    snippet = snippets(client, {"text": "walrus"}, fancy)[fancy]
    assert snippet["subject"] == "Fish &amp; &lt;chips&gt; &quot;for&quot; <mark>walrus</mark>"
    preview = snippet["preview"]
    assert "<mark>walrus</mark>" in preview
    assert len(preview.encode()) <= 255
    assert not re.search(r"&(?![a-z]+;|#x?[0-9a-f]+;)", preview)  # no cut entity
    shown = html.unescape(preview.replace("<mark>", "").replace("</mark>", ""))
    assert "<" not in preview.replace("<mark>", "").replace("</mark>", "")
    assert shown in " ".join(FANCY_BODY.split())


def test_each_condition_marks_its_own_field(client: Jmap, alice: Person) -> None:
    """text marks both; body only the preview; subject (substrings) only the subject."""
    hello, reply, other = (email_id(alice.messages[k]) for k in ("hello", "reply", "other"))
    by_body = snippets(client, {"body": "walrus"}, hello, reply)
    assert by_body[hello] == {"emailId": hello, "subject": None, "preview": None}
    assert by_body[reply]["subject"] is None
    assert by_body[reply]["preview"] == "The <mark>walrus</mark> is well."
    by_subject = snippets(client, {"subject": "walr"}, hello, reply)
    assert by_subject[hello] == {
        "emailId": hello,
        "subject": "Hello <mark>walr</mark>us",
        "preview": None,
    }
    by_header = snippets(client, {"header": ["Subject", "lunch"]}, other)
    assert by_header[other]["subject"] == "<mark>Lunch</mark> plans"
    phrase = snippets(client, {"text": '"walrus is"'}, reply)
    assert phrase[reply]["preview"] == "The <mark>walrus is</mark> well."
    prefix = snippets(client, {"text": "the wal"}, reply)
    assert prefix[reply]["preview"] == "<mark>The</mark> <mark>walrus</mark> is well."


def test_nothing_marked_without_words(client: Jmap, alice: Person) -> None:
    """NOT branches, address conditions and no filter at all mark nothing."""
    hello, reply = (email_id(alice.messages[k]) for k in ("hello", "reply"))
    nothing = {"emailId": hello, "subject": None, "preview": None}
    negated = {"operator": "NOT", "conditions": [{"text": "walrus"}]}
    assert snippets(client, negated, hello)[hello] == nothing
    assert snippets(client, {"from": "alice"}, hello)[hello] == nothing
    assert snippets(client, None, hello)[hello] == nothing
    both = {"operator": "OR", "conditions": [{"subject": "hello"}, {"body": "well"}]}
    marked = snippets(client, both, reply)[reply]
    assert marked["subject"] == "Re: <mark>Hello</mark> walrus"
    assert marked["preview"] == "The walrus is <mark>well</mark>."


def test_not_found(client: Jmap, alice: Person, bob: Person) -> None:
    """Unknown ids, malformed ids and other users' emails are notFound."""
    mine = email_id(alice.messages["hello"])
    theirs = email_id(bob.messages["hello"])
    result = client.call(
        "SearchSnippet/get",
        {"filter": {"text": "walrus"}, "emailIds": [mine, "M999999", "nonsense", theirs]},
    )
    assert [s["emailId"] for s in result["list"]] == [mine]
    assert result["notFound"] == ["M999999", "nonsense", theirs]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ({"filter": {"nope": "x"}, "emailIds": []}, "unsupportedFilter"),
        ({"filter": {"hasKeyword": "two words"}, "emailIds": []}, "invalidArguments"),
        ({"filter": {"header": []}, "emailIds": []}, "invalidArguments"),
        ({"filter": {"operator": "XOR", "conditions": []}, "emailIds": []}, "invalidArguments"),
        ({"filter": {"text": "x"}}, "invalidArguments"),
        ({"filter": {"text": "x"}, "emailIds": "M1"}, "invalidArguments"),
        ({"filter": {"text": "x"}, "emailIds": [1]}, "invalidArguments"),
        ({"emailIds": [], "sort": []}, "invalidArguments"),
    ],
)
def test_errors(client: Jmap, args: dict[str, Any], error: str) -> None:
    """The filter is rejected exactly as Email/query rejects it; emailIds is required."""
    result = client.call("SearchSnippet/get", args)
    assert result["error"]["type"] == error, result
