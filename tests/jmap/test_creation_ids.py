"""``#creationId`` in the ``ids`` of a later /get of the same request (RFC 8620 §5.3), over HTTP."""

from __future__ import annotations

from typing import Any

from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.jmap.conftest import USING, Jmap, Person

SUBMISSION = "urn:ietf:params:jmap:submission"


def run(client: Jmap, *calls: list[Any], **request: Any) -> dict[str, Any]:
    """One request of these calls (with the submission capability); the Response object."""
    response = client.post({"using": [*USING, SUBMISSION], "methodCalls": list(calls), **request})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def arguments(response: dict[str, Any], call_id: str) -> dict[str, Any]:
    """The arguments of the response to ``call_id`` (which must not be an error)."""
    (found,) = [r for r in response["methodResponses"] if r[2] == call_id]
    assert found[0] != "error", found
    result: dict[str, Any] = found[1]
    return result


def draft(mailbox: str) -> dict[str, Any]:
    """A small text draft filed in ``mailbox``."""
    return {
        "mailboxIds": {mailbox: True},
        "keywords": {"$draft": True},
        "from": [{"name": "Alice", "email": "alice@example.org"}],
        "subject": "Creation ids",
        "textBody": [{"partId": "t", "type": "text/plain"}],
        "bodyValues": {"t": {"value": "Hello."}},
    }


def test_email_get_resolves_a_created_email(client: Jmap, alice: Person) -> None:
    """Email/get and Thread/get after Email/set create find "#d"; an unknown "#x" is notFound."""
    account = client.account
    inbox = f"L{alice.inbox}"
    response = run(
        client,
        ["Email/set", {"accountId": account, "create": {"d": draft(inbox)}}, "0"],
        [
            "Email/get",
            {"accountId": account, "ids": ["#d", "#x"], "properties": ["subject", "threadId"]},
            "1",
        ],
    )
    created = arguments(response, "0")["created"]["d"]
    got = arguments(response, "1")
    assert got["list"] == [
        {"id": created["id"], "subject": "Creation ids", "threadId": created["threadId"]}
    ]
    assert got["notFound"] == ["#x"]


def test_every_get_resolves_creation_ids(client: Jmap, store: Store, alice: Person) -> None:
    """Mailbox/get and Identity/get take "#m" and "#i"; ids given in createdIds count too."""
    with store.session() as session:
        mail_account = session.get(Account, alice.account_id)
        assert mail_account is not None
        mail_account.settings = {**(mail_account.settings or {}), "email": "alice@example.org"}
    account = client.account
    response = run(
        client,
        ["Mailbox/set", {"accountId": account, "create": {"m": {"name": "Projects"}}}, "0"],
        ["Mailbox/get", {"accountId": account, "ids": ["#m", "#i"], "properties": ["name"]}, "1"],
        [
            "Identity/set",
            {"accountId": account, "create": {"i": {"email": "alice@example.org"}}},
            "2",
        ],
        ["Identity/get", {"accountId": account, "ids": ["#i", "#m", "#nope"]}, "3"],
        ["Thread/get", {"accountId": account, "ids": ["#given", "#nope"]}, "4"],
        createdIds={"given": "T999999"},
    )
    mailbox = arguments(response, "0")["created"]["m"]["id"]
    identity = arguments(response, "2")["created"]["i"]["id"]
    boxes = arguments(response, "1")
    assert boxes["list"] == [{"id": mailbox, "name": "Projects"}]
    assert boxes["notFound"] == ["#i"]  # not created yet when Mailbox/get ran
    people = arguments(response, "3")
    assert [i["id"] for i in people["list"]] == [identity]
    assert people["notFound"] == [mailbox, "#nope"]  # a mailbox id is no identity
    threads = arguments(response, "4")
    assert threads["list"] == [] and threads["notFound"] == ["T999999", "#nope"]
    assert response["createdIds"] == {"given": "T999999", "m": mailbox, "i": identity}


def test_creation_ids_of_another_request_are_unknown(client: Jmap, alice: Person) -> None:
    """A creation id lives for one request: the next one answers it in notFound."""
    account = client.account
    first = run(
        client,
        ["Email/set", {"accountId": account, "create": {"d": draft(f"L{alice.inbox}")}}, "0"],
    )
    assert arguments(first, "0")["created"]["d"]["id"]
    second = run(client, ["Email/get", {"accountId": account, "ids": ["#d"]}, "1"])
    got = arguments(second, "1")
    assert got["list"] == [] and got["notFound"] == ["#d"]
