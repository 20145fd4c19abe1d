"""Email/set update over HTTP: mailboxIds end exactly as set; every refusal is its RFC error."""

from __future__ import annotations

from typing import Any

from mailroom.labels.resolver import resolve_path
from mailroom.store.engine import Store
from tests.jmap.conftest import Jmap, Person, email_id


def mailboxes(client: Jmap) -> dict[str, str]:
    """Mailbox ids by role, and by name for mailboxes without a role."""
    found = client.call("Mailbox/get", {"ids": None})["list"]
    return {box["role"] or box["name"]: box["id"] for box in found}


def label(store: Store, person: Person, name: str) -> str:
    """The mailbox id of a (new) user label."""
    with store.session() as session:
        return f"L{resolve_path(session, person.user_id, [name]).id}"


def boxes_of(client: Jmap, email: str) -> dict[str, bool]:
    """The mailboxIds Email/get reports."""
    got = client.call("Email/get", {"ids": [email], "properties": ["mailboxIds"]})
    result: dict[str, bool] = got["list"][0]["mailboxIds"]
    return result


def update(client: Jmap, email: str, patch: Any) -> dict[str, Any]:
    """One Email/set update; the whole response."""
    result: dict[str, Any] = client.call("Email/set", {"update": {email: patch}})
    assert "error" not in result, result
    return result


def refusal(client: Jmap, email: str, patch: Any) -> dict[str, Any]:
    """The SetError of an update that must be refused."""
    result = update(client, email, patch)
    assert result["updated"] is None, result
    error: dict[str, Any] = result["notUpdated"][email]
    return error


def test_replacing_mailboxes_ends_exactly_as_set(store: Store, client: Jmap, alice: Person) -> None:
    """Inbox replaced by a user label (whole value) leaves that label only, no Archive."""
    work = label(store, alice, "Work")
    email = email_id(alice.messages["hello"])
    result = update(client, email, {"mailboxIds": {work: True}})
    assert result["updated"] == {email: None}
    assert boxes_of(client, email) == {work: True}


def test_patched_mailboxes_end_exactly_as_set(store: Store, client: Jmap, alice: Person) -> None:
    """mailboxIds/X patches move between mailboxes and add several; nothing else is added."""
    work, home = label(store, alice, "Work"), label(store, alice, "Home")
    boxes = mailboxes(client)
    email = email_id(alice.messages["other"])
    patch = {f"mailboxIds/{boxes['inbox']}": None, f"mailboxIds/{work}": True}
    assert update(client, email, patch)["updated"] == {email: None}
    assert boxes_of(client, email) == {work: True}
    update(client, email, {f"mailboxIds/{home}": True, f"mailboxIds/{boxes['archive']}": True})
    assert boxes_of(client, email) == {work: True, home: True, boxes["archive"]: True}
    update(client, email, {"mailboxIds": {boxes["inbox"]: True, boxes["archive"]: True}})
    assert boxes_of(client, email) == {boxes["inbox"]: True, boxes["archive"]: True}


def test_empty_and_unknown_mailboxes_are_invalid_properties(
    store: Store, client: Jmap, alice: Person, bob: Person
) -> None:
    """No mailbox at all, an unknown id, another user's mailbox: invalidProperties mailboxIds."""
    email = email_id(alice.messages["hello"])
    inbox = f"L{alice.inbox}"
    bobs = f"L{bob.inbox}"
    patches: list[dict[str, Any]] = [
        {"mailboxIds": {}},
        {f"mailboxIds/{inbox}": None},
        {"mailboxIds": {"L99999999": True}},
        {"mailboxIds": {"nonsense": True}},
        {"mailboxIds": {bobs: True}},
        {f"mailboxIds/{bobs}": True},
    ]
    for patch in patches:
        error = refusal(client, email, patch)
        assert error["type"] == "invalidProperties" and error["properties"] == ["mailboxIds"]
    assert boxes_of(client, email) == {inbox: True}


def test_values_other_than_true_are_invalid_properties(client: Jmap, alice: Person) -> None:
    """A map value that is not true, or a patch value that is neither true nor null, is refused."""
    email = email_id(alice.messages["hello"])
    inbox = f"L{alice.inbox}"
    assert refusal(client, email, {"mailboxIds": {inbox: False}})["properties"] == ["mailboxIds"]
    assert refusal(client, email, {"mailboxIds": [inbox]})["properties"] == ["mailboxIds"]
    error = refusal(client, email, {f"mailboxIds/{inbox}": False})
    assert error["type"] == "invalidProperties"
    assert error["properties"] == [f"mailboxIds/{inbox}"]
    error = refusal(client, email, {"keywords/$seen": "yes"})
    assert error["properties"] == ["keywords/$seen"]


def test_malformed_patches_are_invalid_patch(client: Jmap, alice: Person) -> None:
    """A whole value and a patch of the same property, a deep path, a non-object: invalidPatch."""
    email = email_id(alice.messages["hello"])
    inbox = f"L{alice.inbox}"
    for patch in (
        {"keywords": {"$seen": True}, "keywords/$flagged": True},
        {"mailboxIds": {inbox: True}, f"mailboxIds/{inbox}": None},
        {"keywords/$seen/deeper": True},
        {"keywords/": True},
        {"": True},
        ["keywords"],
        "keywords",
    ):
        assert refusal(client, email, patch)["type"] == "invalidPatch", patch


def test_immutable_and_unknown_properties_are_invalid_properties(
    client: Jmap, alice: Person
) -> None:
    """subject, from, receivedAt given new values, or an unknown property, are named."""
    email = email_id(alice.messages["hello"])
    error = refusal(
        client,
        email,
        {
            "subject": "new",
            "from": [{"name": None, "email": "x@example.org"}],
            "receivedAt": "2001-01-01T00:00:00Z",
            "noSuchProperty": 1,
            "keywords/$seen": True,
        },
    )
    assert error["type"] == "invalidProperties"
    assert error["properties"] == ["from", "noSuchProperty", "receivedAt", "subject"]
    assert refusal(client, email, {"subject/0": "x"})["properties"] == ["subject"]
    keywords = client.call("Email/get", {"ids": [email], "properties": ["keywords"]})
    assert keywords["list"][0]["keywords"] == {}


def test_immutable_properties_with_their_current_value_are_accepted(
    client: Jmap, alice: Person
) -> None:
    """An immutable property given the value it has is no change (RFC 8620 §5.3)."""
    email = email_id(alice.messages["hello"])
    current = client.call(
        "Email/get", {"ids": [email], "properties": ["subject", "receivedAt", "threadId", "id"]}
    )["list"][0]
    patch = {**current, "keywords/$seen": True}
    assert update(client, email, patch)["updated"] == {email: None}
    got = client.call("Email/get", {"ids": [email], "properties": ["keywords"]})
    assert got["list"][0]["keywords"] == {"$seen": True}


def test_if_in_state_and_not_found(client: Jmap, alice: Person, bob: Person) -> None:
    """A stale ifInState is stateMismatch; another user's or a malformed id is notFound."""
    state = client.state("Email")
    email = email_id(alice.messages["hello"])
    stale = client.call(
        "Email/set", {"ifInState": "1" + state, "update": {email: {"keywords/$seen": True}}}
    )
    assert stale["error"]["type"] == "stateMismatch"
    fresh = client.call(
        "Email/set", {"ifInState": state, "update": {email: {"keywords/$seen": True}}}
    )
    assert fresh["oldState"] == state and fresh["newState"] != state
    assert fresh["updated"] == {email: None}
    foreign = email_id(bob.messages["hello"])
    result = client.call(
        "Email/set",
        {"update": {foreign: {"keywords/$seen": True}, "Mxyz": {}, "T1": {}}},
    )
    assert {k: v["type"] for k, v in result["notUpdated"].items()} == {
        foreign: "notFound",
        "Mxyz": "notFound",
        "T1": "notFound",
    }


def test_updated_reports_only_what_the_server_changed(client: Jmap, alice: Person) -> None:
    """Starring through the Starred mailbox reports the keywords; $flagged the mailboxIds."""
    boxes = mailboxes(client)
    email = email_id(alice.messages["hello"])
    starred = boxes["flagged"]
    inbox = boxes["inbox"]
    result = update(client, email, {f"mailboxIds/{starred}": True})
    assert result["updated"] == {email: {"keywords": {"$flagged": True}}}
    result = update(client, email, {"keywords/$flagged": None})
    assert result["updated"] == {email: {"mailboxIds": {inbox: True}}}
    assert update(client, email, {})["updated"] == {email: None}


def test_one_refused_update_leaves_the_others(client: Jmap, alice: Person) -> None:
    """Each email is its own savepoint: a refused patch does not undo a good one."""
    good, bad = email_id(alice.messages["hello"]), email_id(alice.messages["other"])
    result = client.call(
        "Email/set",
        {"update": {good: {"keywords/$answered": True}, bad: {"keywords/$seen": True, "size": 1}}},
    )
    assert result["updated"] == {good: None}
    assert result["notUpdated"][bad]["properties"] == ["size"]
    got = client.call("Email/get", {"ids": [good, bad], "properties": ["keywords"]})["list"]
    assert [e["keywords"] for e in got] == [{"$answered": True}, {}]


def test_creation_ids_name_mailboxes_and_emails_of_the_same_request(
    client: Jmap, alice: Person
) -> None:
    """#box from Mailbox/set and #draft from Email/set create work in later updates."""
    email = email_id(alice.messages["hello"])
    responses = client.calls(
        ["Mailbox/set", {"accountId": client.account, "create": {"box": {"name": "New"}}}, "m"],
        [
            "Email/set",
            {"accountId": client.account, "update": {email: {"mailboxIds": {"#box": True}}}},
            "e",
        ],
    )
    new_box = responses[0][1]["created"]["box"]["id"]
    assert responses[1][1]["updated"] == {email: None}, responses[1]
    assert boxes_of(client, email) == {new_box: True}
    inbox = f"L{alice.inbox}"
    responses = client.calls(
        [
            "Email/set",
            {
                "accountId": client.account,
                "create": {"d": {"mailboxIds": {inbox: True}, "subject": "draft"}},
            },
            "c",
        ],
        [
            "Email/set",
            {"accountId": client.account, "update": {"#d": {"keywords/$answered": True}}},
            "u",
        ],
        ["Email/set", {"accountId": client.account, "update": {"#nothing": {}}}, "n"],
    )
    created = responses[0][1]["created"]["d"]["id"]
    assert responses[1][1]["updated"] == {created: None}, responses[1]
    assert responses[2][1]["notUpdated"]["#nothing"]["type"] == "notFound"
    got = client.call("Email/get", {"ids": [created], "properties": ["keywords"]})
    assert got["list"][0]["keywords"] == {"$answered": True}
