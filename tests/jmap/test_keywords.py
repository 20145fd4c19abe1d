"""Keywords over JMAP (RFC 8621 §4.1.1): any valid keyword is kept, shown, changed and logged."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from mailroom.store.engine import Store
from mailroom.store.models import PendingChange
from tests.jmap.conftest import Jmap, Person, email_id


def keywords_of(client: Jmap, *emails: str) -> list[dict[str, bool]]:
    """The keywords Email/get reports for these emails, in order."""
    got = client.call("Email/get", {"ids": list(emails), "properties": ["keywords"]})
    return [email["keywords"] for email in got["list"]]


def set_keywords(client: Jmap, email: str, patch: dict[str, Any]) -> dict[str, Any]:
    """One Email/set update; the whole response."""
    result: dict[str, Any] = client.call("Email/set", {"update": {email: patch}})
    assert "error" not in result, result
    return result


def test_every_kind_of_keyword_is_kept_lower_cased(client: Jmap, alice: Person) -> None:
    """Registered and custom keywords (any case) are stored lower-cased and all shown."""
    email = email_id(alice.messages["hello"])
    given = {
        "$Answered": True,
        "$forwarded": True,
        "$draft": True,
        "$junk": True,
        "$NotJunk": True,
        "$phishing": True,
        "$MDNSent": True,
        "$seen": True,
        "$Flagged": True,
        "Project[X": True,
        "x" * 255: True,
    }
    updated = set_keywords(client, email, {"keywords": given})["updated"]
    assert list(updated[email] or {}) == ["mailboxIds"]  # $flagged added the Starred mailbox
    assert keywords_of(client, email) == [
        {key.lower(): True for key in sorted(given, key=str.lower)}
    ]
    assert keywords_of(client, email_id(alice.messages["other"])) == [{}]


def test_patches_add_and_remove_single_keywords(client: Jmap, alice: Person) -> None:
    """keywords/K: true adds K, null removes it (names compared without case); others stay."""
    email = email_id(alice.messages["hello"])
    set_keywords(client, email, {"keywords/$answered": True, "keywords/Custom": True})
    set_keywords(client, email, {"keywords/$forwarded": True, "keywords/CUSTOM": None})
    assert keywords_of(client, email) == [{"$answered": True, "$forwarded": True}]
    set_keywords(client, email, {"keywords/a~1b~0c": True})  # JSON Pointer escapes
    assert keywords_of(client, email) == [{"$answered": True, "$forwarded": True, "a/b~c": True}]
    set_keywords(client, email, {"keywords": {}})
    assert keywords_of(client, email) == [{}]


def test_invalid_keywords_are_invalid_properties(client: Jmap, alice: Person) -> None:
    """Empty, too long, spaces, ( ) { ] % * " \\ and non-ASCII keywords are refused untouched."""
    email = email_id(alice.messages["hello"])
    bad = ["", "x" * 256, "two words", "a(b", "a)b", "a{b", "a]b", "a%b", "a*b", 'a"b', "a\\b", "é"]
    for keyword in bad:
        result = set_keywords(client, email, {"keywords": {keyword: True, "$seen": True}})
        error = result["notUpdated"][email]
        assert error["type"] == "invalidProperties" and error["properties"] == ["keywords"]
        escaped = keyword.replace("~", "~0").replace("/", "~1")
        if escaped:
            result = set_keywords(client, email, {f"keywords/{escaped}": True})
            error = result["notUpdated"][email]
            assert error["properties"] == [f"keywords/{escaped}"], keyword
    assert keywords_of(client, email) == [{}]


def test_draft_is_a_keyword_of_its_own(client: Jmap, alice: Person) -> None:
    """$draft can be set and cleared anywhere; being in Drafts does not add it."""
    boxes = {b["role"]: b["id"] for b in client.call("Mailbox/get", {"ids": None})["list"]}
    email = email_id(alice.messages["hello"])
    set_keywords(client, email, {"keywords/$draft": True})
    assert keywords_of(client, email) == [{"$draft": True}]
    result = set_keywords(client, email, {"mailboxIds": {boxes["drafts"]: True}, "keywords": {}})
    assert result["updated"] == {email: None}
    assert keywords_of(client, email) == [{}]


def test_keyword_changes_are_email_changes_with_a_pending_change(
    store: Store, client: Jmap, alice: Person
) -> None:
    """A keyword change moves the Email state, shows in Email/changes and queues one change."""
    email = email_id(alice.messages["reply"])
    before = client.state("Email")
    set_keywords(client, email, {"keywords/$answered": True})
    changes = client.call("Email/changes", {"sinceState": before})
    assert changes["updated"] == [email] and changes["created"] == []
    again = client.state("Email")
    assert set_keywords(client, email, {"keywords/$answered": True})["newState"] == again
    with store.session() as session:
        queued = session.execute(
            select(PendingChange.operation, PendingChange.payload).where(
                PendingChange.message_id == alice.messages["reply"]
            )
        ).all()
    assert [(op, payload) for op, payload in queued] == [
        ("keywords", {"keywords": {"$answered": True}})
    ]


def test_seen_still_moves_unread_counts(client: Jmap, alice: Person) -> None:
    """$seen is read state: the Inbox's unread count follows; custom keywords leave it."""

    def unread() -> int:
        inbox = client.call("Mailbox/get", {"ids": [f"L{alice.inbox}"]})["list"][0]
        count: int = inbox["unreadEmails"]
        return count

    email = email_id(alice.messages["hello"])
    start = unread()
    set_keywords(client, email, {"keywords/$junk": True})
    assert unread() == start
    set_keywords(client, email, {"keywords/$seen": True})
    assert unread() == start - 1
