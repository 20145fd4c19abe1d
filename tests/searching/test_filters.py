"""A parsed search as a JMAP filter: conditions, labels, dates in the user's zone, and
Spam and Trash left out unless named."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from mailroom.searching.filters import EVERYTHING, NOTHING, jmap_text, to_filter
from mailroom.searching.syntax import QueryError, parse

NOW = datetime(2024, 3, 31, 12, 30, tzinfo=UTC)
ROLES = {"inbox": 1, "starred": 2, "sent": 4, "spam": 8, "trash": 9, "snoozed": 3}
LABELS = {"Work": 20, "Work/Projects": 21, "Big Plans": 22}
SKIP_BOTH = {"operator": "NOT", "conditions": [{"inMailbox": "L8"}, {"inMailbox": "L9"}]}


def built(query: str, zone: Any = UTC, roles: dict[str, int] = ROLES) -> dict[str, Any]:
    node = parse(query)
    assert node is not None
    return to_filter(node, now=NOW, zone=zone, labels=LABELS, roles=roles)


def searched(query: str, **kwargs: Any) -> dict[str, Any]:
    """The filter without the Spam/Trash exclusion (asserted to be there)."""
    found = built(query, **kwargs)
    assert found["operator"] == "AND" and found["conditions"][1] == SKIP_BOTH, found
    condition: dict[str, Any] = found["conditions"][0]
    return condition


@pytest.mark.parametrize(
    ("query", "condition"),
    [
        ("lunch", {"text": "lunch"}),
        ("lunch friday", {"text": "lunch friday"}),
        ('"next friday" lunch', {"text": '"next friday" lunch'}),
        ("don't", {"text": '"don\'t"'}),  # an apostrophe is no JMAP quote here
        ('say "a \\"b\\""', {"text": 'say "a \\"b\\""'}),
        ("from:ann", {"from": "ann"}),
        ('from:"Ann Lee"', {"from": '"Ann Lee"'}),
        ("to:bob cc:carol", {"operator": "AND", "conditions": [{"to": "bob"}, {"cc": "carol"}]}),
        ("bcc:dave", {"bcc": "dave"}),
        ("subject:o'brien", {"subject": '"o\'brien"'}),
        ("has:attachment", {"hasAttachment": True}),
        ("is:unread", {"notKeyword": "$seen"}),
        ("is:read", {"hasKeyword": "$seen"}),
        ("is:starred", {"hasKeyword": "$flagged"}),
        ("in:starred", {"hasKeyword": "$flagged"}),
        ("is:snoozed", {"inMailbox": "L3"}),
        ("in:inbox", {"inMailbox": "L1"}),
        ("in:sent", {"inMailbox": "L4"}),
        ("in:drafts", NOTHING),  # the user has no Drafts box: nothing is in it
        ("label:work", {"inMailbox": "L20"}),
        ("label:WORK/projects", {"inMailbox": "L21"}),
        ("label:big-plans", {"inMailbox": "L22"}),
        ('label:"big plans"', {"inMailbox": "L22"}),
        ("label:inbox", {"inMailbox": "L1"}),
        ("larger:2k", {"minSize": 2048}),
        ("smaller:1M", {"maxSize": 1024 * 1024}),
        ("-is:read", {"operator": "NOT", "conditions": [{"hasKeyword": "$seen"}]}),
        (
            "invoice from:ann -receipt",
            {
                "operator": "AND",
                "conditions": [
                    {"text": "invoice"},
                    {"from": "ann"},
                    {"operator": "NOT", "conditions": [{"text": "receipt"}]},
                ],
            },
        ),
        (
            "from:ann OR from:bob",
            {"operator": "OR", "conditions": [{"from": "ann"}, {"from": "bob"}]},
        ),
        (
            "{lunch dinner} is:unread",
            {
                "operator": "AND",
                "conditions": [
                    {"operator": "OR", "conditions": [{"text": "lunch"}, {"text": "dinner"}]},
                    {"notKeyword": "$seen"},
                ],
            },
        ),
    ],
)
def test_conditions(query: str, condition: dict[str, Any]) -> None:
    """Each term becomes the JMAP condition that means it."""
    assert searched(query) == condition


@pytest.mark.parametrize(
    ("query", "condition"),
    [
        ("before:2024-03-01", {"before": "2024-03-01T00:00:00Z"}),
        ("after:2024/3/1", {"after": "2024-03-01T00:00:00Z"}),
        ("older_than:3d", {"before": "2024-03-28T12:30:00Z"}),
        ("newer_than:2w", {"after": "2024-03-17T12:30:00Z"}),
        ("newer_than:1m", {"after": "2024-02-29T12:30:00Z"}),  # 31 March less a month
        ("older_than:1y", {"before": "2023-03-31T12:30:00Z"}),
    ],
)
def test_dates_and_ages(query: str, condition: dict[str, Any]) -> None:
    """Days start at midnight; ages count back from the clock (calendar months and years)."""
    assert searched(query) == condition


def test_days_start_in_the_users_zone() -> None:
    """before:/after: mean the user's midnight, written in UTC."""
    berlin, new_york = ZoneInfo("Europe/Berlin"), ZoneInfo("America/New_York")
    assert searched("after:2024-03-01", zone=berlin) == {"after": "2024-02-29T23:00:00Z"}
    assert searched("before:2024-07-01", zone=new_york) == {"before": "2024-07-01T04:00:00Z"}


def test_spam_and_trash_are_left_out_unless_named() -> None:
    """A search skips Spam and Trash; naming one (even negated) searches it, anywhere both."""
    assert built("in:spam") == {
        "operator": "AND",
        "conditions": [
            {"inMailbox": "L8"},
            {"operator": "NOT", "conditions": [{"inMailbox": "L9"}]},
        ],
    }
    assert built("label:trash lunch")["conditions"][1] == {
        "operator": "NOT",
        "conditions": [{"inMailbox": "L8"}],
    }
    assert built("in:anywhere") == EVERYTHING
    assert built("lunch in:anywhere") == {
        "operator": "AND",
        "conditions": [{"text": "lunch"}, EVERYTHING],
    }
    assert built("in:spam OR in:trash") == {
        "operator": "OR",
        "conditions": [{"inMailbox": "L8"}, {"inMailbox": "L9"}],
    }
    assert built("lunch", roles={"inbox": 1}) == {"text": "lunch"}  # no such boxes to skip


def test_unknown_label_and_far_dates_are_sentences() -> None:
    """An unknown label and a date the clock cannot reach are QueryErrors."""
    with pytest.raises(QueryError, match=r"^There is no label 'Holidays'; the sidebar lists"):
        built("label:Holidays")
    with pytest.raises(QueryError, match=r"^older_than:9999y is too far back in time\.$"):
        built("older_than:9999y")
    with pytest.raises(QueryError, match=r"^after:0001-01-01 is too far back in time\.$"):
        built("after:0001-01-01", zone=ZoneInfo("Asia/Tokyo"))


def test_jmap_text_keeps_values_whole() -> None:
    """Values with spaces, quotes or backslashes are quoted for the JMAP tokenizer."""
    assert jmap_text("ann", phrase=False) == "ann"
    assert jmap_text("ann", phrase=True) == '"ann"'
    assert jmap_text("a b", phrase=False) == '"a b"'
    assert jmap_text('a"b\\c', phrase=False) == '"a\\"b\\\\c"'
