"""EmailSubmission/query, /queryChanges, /changes and push (RFC 8621 §7.3, §7.4), both stores."""

from __future__ import annotations

from typing import Any

from tests.jmap.conftest import apply_query_changes
from tests.jmap.email_submission_helpers import Sending
from tests.jmap.email_submission_helpers import sending as sending  # the fixture
from tests.jmap.test_push import stream


def three(sending: Sending) -> tuple[list[str], list[str]]:
    """Three submissions a minute apart, the second a reply in Bob's thread, the third canceled.

    Returns their ids and their email ids, oldest first.
    """
    emails: list[str] = []
    found: list[str] = []
    for n, extra in enumerate(({}, {"inReplyTo": ["reply@x"], "references": ["reply@x"]}, {})):
        emails.append(sending.create_draft(subject=f"Number {n}", **extra))
        found.append(sending.submit(emails[-1])["created"]["s"]["id"])
        sending.clock.advance(60)
    done = sending.call("EmailSubmission/set", update={found[2]: {"undoStatus": "canceled"}})
    assert done["updated"] == {found[2]: None}
    return found, emails


def query(sending: Sending, **args: Any) -> dict[str, Any]:
    """EmailSubmission/query, which must succeed."""
    answer: dict[str, Any] = sending.call("EmailSubmission/query", **args)
    assert "error" not in answer, answer
    return answer


def test_filters(sending: Sending) -> None:
    """identityIds, emailIds, threadIds, undoStatus, before/after, and the operators."""
    (first, second, third), emails = three(sending)
    assert sending.run_lane() == 2  # the canceled one stays
    assert query(sending)["ids"] == [first, second, third]
    identity = sending.identity()
    assert query(sending, filter={"identityIds": [identity]})["ids"] == [first, second, third]
    assert query(sending, filter={"identityIds": ["I999999"]})["ids"] == []
    assert query(sending, filter={"emailIds": [emails[1], "M999999"]})["ids"] == [second]
    (reply,) = sending.call("Email/get", ids=[emails[1]], properties=["threadId"])["list"]
    (mine,) = sending.call("Email/get", ids=[emails[0]], properties=["threadId"])["list"]
    assert query(sending, filter={"threadIds": [reply["threadId"]]})["ids"] == [second]
    assert query(sending, filter={"threadIds": [mine["threadId"]]})["ids"] == [first]
    assert query(sending, filter={"undoStatus": "final"})["ids"] == [first, second]
    assert query(sending, filter={"undoStatus": "canceled"})["ids"] == [third]
    (middle,) = sending.call("EmailSubmission/get", ids=[second])["list"]
    assert query(sending, filter={"before": middle["sendAt"]})["ids"] == [first]
    assert query(sending, filter={"after": middle["sendAt"]})["ids"] == [second, third]
    either = {
        "operator": "OR",
        "conditions": [{"undoStatus": "canceled"}, {"emailIds": [emails[0]]}],
    }
    assert query(sending, filter=either)["ids"] == [first, third]
    neither = {"operator": "NOT", "conditions": [either]}
    assert query(sending, filter=neither)["ids"] == [second]
    both = {"operator": "AND", "conditions": [{"undoStatus": "final"}, {"after": middle["sendAt"]}]}
    assert query(sending, filter=both)["ids"] == [second]
    for wrong, kind in (
        ({"subject": "x"}, "unsupportedFilter"),
        ({"undoStatus": "maybe"}, "invalidArguments"),
        ({"emailIds": "M1"}, "invalidArguments"),
        ({"before": "yesterday"}, "invalidArguments"),
        ({"operator": "XOR", "conditions": []}, "invalidArguments"),
    ):
        answer = sending.call("EmailSubmission/query", filter=wrong)
        assert answer["error"]["type"] == kind, wrong


def test_sorts_and_pages(sending: Sending) -> None:
    """sentAt, emailId and threadId sorts; position, anchor, limit and total."""
    (first, second, third), _ = three(sending)
    newest = query(sending, sort=[{"property": "sentAt", "isAscending": False}])
    assert newest["ids"] == [third, second, first]
    by_email = query(sending, sort=[{"property": "emailId", "isAscending": False}])
    assert by_email["ids"] == [third, second, first]
    by_thread = query(sending, sort=[{"property": "threadId"}])
    assert sorted(by_thread["ids"]) == sorted([first, second, third])
    assert by_thread["canCalculateChanges"] is False
    bad = sending.call("EmailSubmission/query", sort=[{"property": "subject"}])
    assert bad["error"]["type"] == "unsupportedSort"
    page = query(sending, position=1, limit=1, calculateTotal=True)
    assert (page["ids"], page["position"], page["total"]) == ([second], 1, 3)
    assert query(sending, anchor=third, anchorOffset=-1)["ids"] == [second, third]
    assert query(sending, position=-1)["ids"] == [third]
    missing = sending.call("EmailSubmission/query", anchor="S999999")
    assert missing["error"]["type"] == "anchorNotFound"


def test_query_changes_and_changes(sending: Sending) -> None:
    """queryChanges brings a cached list up to date; /changes folds created and updated."""
    (first, second, third), _ = three(sending)
    before = query(sending, filter={"undoStatus": "pending"})
    assert before["ids"] == [first, second] and before["canCalculateChanges"] is True
    state = sending.call("EmailSubmission/get", ids=[])["state"]
    assert before["queryState"] == state
    assert sending.run_lane() == 2
    fourth = sending.submit(sending.create_draft(subject="Four"))["created"]["s"]["id"]
    delta = sending.call(
        "EmailSubmission/queryChanges",
        filter={"undoStatus": "pending"},
        sinceQueryState=before["queryState"],
        calculateTotal=True,
    )
    after = query(sending, filter={"undoStatus": "pending"})
    assert after["ids"] == [fourth]
    assert apply_query_changes(before["ids"], delta) == after["ids"]
    assert delta["newQueryState"] == after["queryState"] and delta["total"] == 1
    too_many = sending.call(
        "EmailSubmission/queryChanges", sinceQueryState=before["queryState"], maxChanges=1
    )
    assert too_many["error"]["type"] == "tooManyChanges"
    by_thread = sending.call(
        "EmailSubmission/queryChanges",
        filter={"threadIds": ["T1"]},
        sinceQueryState=before["queryState"],
    )
    assert by_thread["error"]["type"] == "cannotCalculateChanges"
    changes = sending.call("EmailSubmission/changes", sinceState=state)
    assert sorted(changes["updated"]) == sorted([first, second])
    assert changes["created"] == [fourth] and changes["destroyed"] == []
    paged = sending.call("EmailSubmission/changes", sinceState=state, maxChanges=1)
    assert paged["hasMoreChanges"] is True
    stale = sending.call("EmailSubmission/changes", sinceState="999999999")
    assert stale["error"]["type"] == "cannotCalculateChanges"


def test_submission_changes_are_pushed(sending: Sending) -> None:
    """The EmailSubmission push type moves when a submission is created or sent."""
    with stream(
        sending.server, sending.person, "types=EmailSubmission&closeafter=no&ping=0"
    ) as events:
        events.next()  # the bare id line of a fresh connection
        submitted = sending.submit(sending.create_draft())
        event = events.next_of("state")
        changed = event.data["changed"][sending.client.account]
        assert changed == {"EmailSubmission": submitted["newState"]}
        assert sending.run_lane() == 1
        state = sending.call("EmailSubmission/get", ids=[])["state"]
        assert int(state) > int(submitted["newState"])
        seen = []  # claimed, then sent: one event or two, as the polls fall
        while state not in seen:
            seen.append(events.next_of("state").data["changed"][sending.client.account])
            seen[-1] = seen[-1]["EmailSubmission"]
