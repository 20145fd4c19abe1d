"""Email/query sorting over HTTP: every RFC 8621 sort property, collations, several
comparators, collapseThreads and paging with each, and the sort errors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from mailroom.store.engine import Store
from mailroom.store.models import MessageKeyword
from tests.factories import make_message
from tests.helpers import ingest
from tests.jmap.conftest import Jmap, Person, email_id

# Only the emails made here are received from this day on (the seed's are earlier).
AFTER = "2024-03-05T00:00:00Z"
LATER = 6 * 24 * 60  # minutes after the factories' base time: 2024-03-07


@dataclass
class Sortable:
    """Email ids of the four sortable emails, by their letter."""

    ids: dict[str, str]

    def __call__(self, letters: str) -> list[str]:
        return [self.ids[letter] for letter in letters]


@pytest.fixture
def sortable(store: Store, alice: Person) -> Sortable:
    """Four emails in three threads (b and d form one), with keywords stored as rows.

    ====  =======================  ========================  ===========  =======
    key   subject (base subject)   from                      to           minutes
    ====  =======================  ========================  ===========  =======
    a     Re: [list] Banana split  Zed <zed@z.example>       Amy          +0
    b     apple pie                bob@b.example (no name)   carl@x       +1
    c     Fwd: Cherry tart         Émile <emile@e.example>   Zoë          +2
    d     [fwd: re: apple PIE]     adam <adam@a.example>     Bob          +3
    ====  =======================  ========================  ===========  =======

    b has the longest body; $important is on b and c, $x on d, $y on a, b and d.
    """
    raws = [
        (
            "sort-a",
            make_message(
                "sort-a@x",
                subject="Re: [list] Banana split",
                sender="Zed <zed@z.example>",
                to="Amy <amy@x.example>",
                minutes=LATER,
            ),
        ),
        (
            "sort-b",
            make_message(
                "sort-b@x",
                subject="apple pie",
                sender="bob@b.example",
                to="carl@x.example",
                body="A long body. " * 200,
                minutes=LATER + 1,
            ),
        ),
        (
            "sort-c",
            make_message(
                "sort-c@x",
                subject="Fwd: Cherry tart",
                sender="Émile <emile@e.example>",
                to="Zoë <zoe@x.example>",
                minutes=LATER + 2,
            ),
        ),
        (
            "sort-d",
            make_message(
                "sort-d@x",
                subject="[fwd: re: apple PIE]",
                sender="adam <adam@a.example>",
                in_reply_to="sort-b@x",
                references=["sort-b@x"],
                minutes=LATER + 3,
            ),
        ),
    ]
    result = ingest(store, (alice.user_id, alice.account_id, alice.inbox), raws)
    by_letter = dict(zip("abcd", sorted(result.created_ids), strict=True))
    with store.session() as session:
        for letters, keyword in (("bc", "$important"), ("d", "$x"), ("abd", "$y")):
            for letter in letters:
                session.add(MessageKeyword(message_id=by_letter[letter], keyword=keyword))
    return Sortable({letter: email_id(mid) for letter, mid in by_letter.items()})


def sorted_ids(client: Jmap, *comparators: dict[str, Any], **args: Any) -> list[str]:
    """The ids of the sortable emails in the order of these comparators."""
    result = client.call(
        "Email/query", {"filter": {"after": AFTER}, "sort": list(comparators), **args}
    )
    assert "error" not in result, result
    ids: list[str] = result["ids"]
    return ids


def test_the_session_lists_every_sort(client: Jmap) -> None:
    """emailQuerySortOptions names exactly the supported sort properties."""
    mail = client.session["accounts"][client.account]["accountCapabilities"][
        "urn:ietf:params:jmap:mail"
    ]
    assert mail["emailQuerySortOptions"] == [
        "receivedAt",
        "size",
        "from",
        "to",
        "subject",
        "sentAt",
        "hasKeyword",
        "allInThreadHaveKeyword",
        "someInThreadHaveKeyword",
    ]


def test_dates_and_size(client: Jmap, sortable: Sortable) -> None:
    """receivedAt and sentAt both ways; size follows the sizes Email/get reports."""
    assert sorted_ids(client, {"property": "receivedAt"}) == sortable("abcd")
    assert sorted_ids(client, {"property": "receivedAt", "isAscending": False}) == sortable("dcba")
    assert sorted_ids(client, {"property": "sentAt", "isAscending": False}) == sortable("dcba")
    by_size = sorted_ids(client, {"property": "size"})
    sizes = client.call("Email/get", {"ids": by_size, "properties": ["size"]})["list"]
    assert [e["size"] for e in sizes] == sorted(e["size"] for e in sizes)
    assert by_size[-1] == sortable("b")[0]


def test_subject_sorts_by_the_base_subject(client: Jmap, sortable: Sortable) -> None:
    """Re:, Fwd:, [list] tags and a [fwd: ...] wrapper are ignored; case under the collation."""
    assert sorted_ids(client, {"property": "subject"}) == sortable("bdac")
    ascii_fold = {"property": "subject", "collation": "i;ascii-casemap"}
    assert sorted_ids(client, ascii_fold) == sortable("bdac")
    exact = {"property": "subject", "collation": "i;octet"}
    assert sorted_ids(client, exact) == sortable("acdb")  # "B" < "C" < "a"; "PIE" < "pie"
    assert sorted_ids(client, {"property": "subject", "isAscending": False}) == sortable("cadb")


def test_from_and_to_sort_by_name_else_email(client: Jmap, sortable: Sortable) -> None:
    """The first address's name, or its email when it has none; Unicode folds only in unicode."""
    assert sorted_ids(client, {"property": "from"}) == sortable("dbca")  # adam bob@ émile zed
    ascii_fold = {"property": "from", "collation": "i;ascii-casemap"}
    assert sorted_ids(client, ascii_fold) == sortable("dbac")  # É sorts after Z in ASCII folding
    assert sorted_ids(client, {"property": "to"}) == sortable("adbc")  # amy bob carl@ zoë


def test_several_comparators_in_order(client: Jmap, sortable: Sortable) -> None:
    """Later comparators break the ties of earlier ones, each in its own direction."""
    newest = {"property": "receivedAt", "isAscending": False}
    assert sorted_ids(client, {"property": "subject"}, newest) == sortable("dbac")
    important = {"property": "hasKeyword", "keyword": "$important", "isAscending": False}
    assert sorted_ids(client, important, {"property": "receivedAt"}) == sortable("bcad")
    assert sorted_ids(client, important, {"property": "from"}) == sortable("bcda")
    some = {"property": "someInThreadHaveKeyword", "keyword": "$x", "isAscending": False}
    assert sorted_ids(client, some, {"property": "subject"}) == sortable("bdac")
    largest = {"property": "size", "isAscending": False}
    assert sorted_ids(client, {"property": "sentAt"}, largest) == sortable("abcd")


def test_keyword_sorts(client: Jmap, sortable: Sortable) -> None:
    """hasKeyword, someInThreadHaveKeyword and allInThreadHaveKeyword (false before true)."""
    oldest = {"property": "receivedAt"}
    some = {"property": "someInThreadHaveKeyword", "keyword": "$X", "isAscending": False}
    assert sorted_ids(client, some, oldest) == sortable("bdac")  # b's thread has d's $x
    every = {"property": "allInThreadHaveKeyword", "keyword": "$y"}
    assert sorted_ids(client, every, oldest) == sortable("cabd")
    flagged = {"property": "hasKeyword", "keyword": "$flagged", "isAscending": False}
    client.call("Email/set", {"update": {sortable("c")[0]: {"keywords/$flagged": True}}})
    assert sorted_ids(client, flagged, oldest) == sortable("cabd")


def test_collapse_threads_keeps_the_first_of_each_thread_in_the_sort(
    client: Jmap, sortable: Sortable
) -> None:
    """With collapseThreads the thread {b, d} appears once, where its first email sorts."""
    args = {"collapseThreads": True, "calculateTotal": True}
    subject = {"property": "subject"}
    newest = {"property": "receivedAt", "isAscending": False}
    assert sorted_ids(client, subject, **args) == sortable("bac")
    assert sorted_ids(client, subject, newest, **args) == sortable("dac")
    largest = {"property": "size", "isAscending": False}
    assert sorted_ids(client, largest, **args)[0] == sortable("b")[0]
    result = client.call(
        "Email/query", {"filter": {"after": AFTER}, "sort": [subject], **args, "position": -2}
    )
    assert result["ids"] == sortable("ac") and result["position"] == 1 and result["total"] == 3


def test_other_comparator_members_are_ignored(client: Jmap, sortable: Sortable) -> None:
    """RFC 8620 §5.5 lets a type add comparator members; jmapc sends paging ones in each."""
    extra = {"property": "receivedAt", "anchorOffset": 0, "position": 0, "calculateTotal": True}
    assert sorted_ids(client, extra) == sortable("abcd")


def test_anchor_and_position_under_another_sort(client: Jmap, sortable: Sortable) -> None:
    """anchor/anchorOffset and position count in the requested order."""
    base = {"filter": {"after": AFTER}, "sort": [{"property": "subject"}]}
    around = client.call("Email/query", {**base, "anchor": sortable("a")[0], "anchorOffset": -1})
    assert around["ids"] == sortable("dac") and around["position"] == 1
    page = client.call("Email/query", {**base, "position": 1, "limit": 2, "calculateTotal": True})
    assert page["ids"] == sortable("da") and page["total"] == 4
    past = client.call("Email/query", {**base, "anchor": sortable("c")[0], "anchorOffset": 5})
    assert past["ids"] == [] and past["position"] == 8
    missing = client.call("Email/query", {**base, "anchor": "M999999"})
    assert missing["error"]["type"] == "anchorNotFound"


@pytest.mark.parametrize(
    ("sort", "error"),
    [
        ([{"property": "preview"}], "unsupportedSort"),
        ([{"property": "subject", "collation": "i;klingon"}], "unsupportedSort"),
        ([{"property": "hasKeyword"}], "invalidArguments"),
        ([{"property": "hasKeyword", "keyword": "has space"}], "invalidArguments"),
        ([{"property": "size", "keyword": "$seen"}], "invalidArguments"),
        ([{"property": "size", "isAscending": "yes"}], "invalidArguments"),
        ([{"property": "size", "collation": 7}], "invalidArguments"),
        ([{"isAscending": True}], "invalidArguments"),
        ({"property": "size"}, "invalidArguments"),
    ],
)
def test_sort_errors(client: Jmap, sort: Any, error: str) -> None:
    """Each malformed or unsupported sort is its precise RFC 8620 error."""
    result = client.call("Email/query", {"sort": sort})
    assert result["error"]["type"] == error, result


def test_a_missing_sent_date_sorts_first(store: Store, client: Jmap, alice: Person) -> None:
    """sentAt of an email without a Date header is null: before every date, in SQL and Python."""
    raw = b"Message-ID: <undated@x>\r\nFrom: u@x.example\r\nSubject: Lunch plans\r\n\r\nNo.\r\n"
    result = ingest(store, (alice.user_id, alice.account_id, alice.inbox), [("undated", raw)])
    undated = email_id(result.created_ids[0])
    other = email_id(alice.messages["other"])  # also "Lunch plans", with a date
    shown = client.call("Email/get", {"ids": [undated], "properties": ["sentAt"]})["list"]
    assert shown == [{"id": undated, "sentAt": None}]

    def ordered(*sort: dict[str, Any]) -> list[str]:
        found: list[str] = client.call("Email/query", {"sort": list(sort)})["ids"]
        return found

    assert ordered({"property": "sentAt"})[0] == undated
    assert ordered({"property": "sentAt", "isAscending": False})[-1] == undated
    by_subject = ordered({"property": "subject"}, {"property": "sentAt"})
    assert by_subject.index(undated) == by_subject.index(other) - 1
    by_subject = ordered({"property": "subject"}, {"property": "sentAt", "isAscending": False})
    assert by_subject.index(undated) == by_subject.index(other) + 1
