"""The Session object (RFC 8620 §2, RFC 8621 §1.3, RFC 8887 §4.1) over real HTTP."""

from __future__ import annotations

from mailroom.jmap.auth import Principal
from mailroom.jmap.dispatcher import Limits
from mailroom.jmap.session import session_document
from tests.jmap.conftest import CORE, MAIL, Jmap, Person, Server

SUBMISSION = "urn:ietf:params:jmap:submission"
VACATION = "urn:ietf:params:jmap:vacationresponse"
WEBSOCKET = "urn:ietf:params:jmap:websocket"
TABS = "urn:mailroom:jmap:tabs"
EVENTS = "urn:mailroom:jmap:events"


def test_capabilities_account_capabilities_and_primary_accounts(
    client: Jmap, server: Server, alice: Person
) -> None:
    """Every capability is in `capabilities`; only account capabilities are primary."""
    session = client.session
    assert set(session["capabilities"]) == {
        CORE,
        MAIL,
        SUBMISSION,
        VACATION,
        WEBSOCKET,
        TABS,
        EVENTS,
    }
    account = session["accounts"][alice.jmap_account]["accountCapabilities"]
    assert set(account) == {MAIL, SUBMISSION, VACATION}
    assert session["primaryAccounts"] == {c: alice.jmap_account for c in account}
    mail = account[MAIL]
    for key in (
        "maxMailboxesPerEmail",
        "maxMailboxDepth",
        "maxSizeMailboxName",
        "maxSizeAttachmentsPerEmail",
        "emailQuerySortOptions",
        "mayCreateTopLevelMailbox",
    ):
        assert key in mail
    assert "receivedAt" in mail["emailQuerySortOptions"]
    submission = account[SUBMISSION]
    assert submission["maxDelayedSend"] == 30 * 86400  # MAILROOM_SEND_MAX_DELAY_SECONDS
    assert list(submission["submissionExtensions"]) == ["FUTURERELEASE"]
    assert session["capabilities"][MAIL] == {} and session["capabilities"][VACATION] == {}
    websocket = session["capabilities"][WEBSOCKET]
    assert websocket == {
        "url": f"ws://{server.base[len('http://') :]}/jmap/ws",
        "supportsPush": True,
    }
    core = session["capabilities"][CORE]
    assert core["maxObjectsInSet"] == Limits().max_objects_in_set
    assert sorted(core["collationAlgorithms"]) == [
        "i;ascii-casemap",
        "i;octet",
        "i;unicode-casemap",
    ]


def test_urls_are_absolute_and_templated(client: Jmap, server: Server) -> None:
    """uploadUrl, downloadUrl and eventSourceUrl carry the RFC 8620 template variables."""
    session = client.session
    assert session["uploadUrl"] == f"{server.base}/jmap/upload/{{accountId}}"
    assert session["downloadUrl"].startswith(f"{server.base}/jmap/download/")
    for variable in ("{accountId}", "{blobId}", "{name}", "{type}"):
        assert variable in session["downloadUrl"]
    assert session["eventSourceUrl"].startswith(f"{server.base}/jmap/eventsource?")
    for variable in ("{types}", "{closeafter}", "{ping}"):
        assert variable in session["eventSourceUrl"]
    echoed = client.calls(["Core/echo", {}, "e"])
    assert echoed  # the API answers with the session's state:
    response = client.post({"using": [CORE], "methodCalls": []}).json()
    assert response["sessionState"] == session["state"]


def test_tls_session_offers_wss(tls_server: Server, alice: Person) -> None:
    """Over https the WebSocket URL is wss."""
    with Jmap(tls_server, alice) as client:
        url = client.session["capabilities"][WEBSOCKET]["url"]
    assert url.startswith("wss://127.0.0.1:") and url.endswith("/jmap/ws")


def test_state_follows_the_document_not_its_urls() -> None:
    """The state differs when the document does (user, limits), not when only the host does."""
    alice, bob = Principal(1, "alice"), Principal(2, "bob")
    one = session_document(alice, "http://a.example", Limits())
    assert one["state"] == session_document(alice, "https://b.example:8443", Limits())["state"]
    assert one["state"] != session_document(bob, "http://a.example", Limits())["state"]
    smaller = Limits(max_objects_in_set=10)
    assert one["state"] != session_document(alice, "http://a.example", smaller)["state"]
