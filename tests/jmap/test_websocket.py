"""JMAP over WebSocket (RFC 8887) with a real WebSocket client (``websockets``) on both stores."""

from __future__ import annotations

import base64
import json
import ssl
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from mailroom.jmap.app import JmapConfig
from mailroom.jmap.dispatcher import Limits
from mailroom.store.engine import Store
from tests.factories import make_message
from tests.helpers import ingest
from tests.jmap.conftest import (
    CORE,
    MAIL,
    PASSWORD,
    Jmap,
    Person,
    Server,
    email_id,
    run_server,
)

WEBSOCKET = "urn:ietf:params:jmap:websocket"


def basic(person: Person) -> dict[str, str]:
    """The Authorization header of the person's password."""
    token = base64.b64encode(f"{person.name}:{PASSWORD}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@pytest.fixture
def socket(client: Jmap, alice: Person) -> Iterator[ClientConnection]:
    """Alice's JMAP WebSocket, from the URL the session names."""
    url = client.session["capabilities"][WEBSOCKET]["url"]
    with connect(url, subprotocols=["jmap"], additional_headers=basic(alice)) as ws:  # type: ignore[list-item]
        yield ws


def ask(ws: ClientConnection, message: dict[str, Any]) -> dict[str, Any]:
    """Send one message; the next message received."""
    ws.send(json.dumps(message))
    answer: dict[str, Any] = json.loads(ws.recv(timeout=30))
    return answer


def enable_push(ws: ClientConnection, **arguments: Any) -> None:
    """WebSocketPushEnable, then a Request answered after it: later changes are pushed.

    The server reads a socket's messages in order and takes the next one only
    once the enabled push has read the states it compares with, so a change
    made after the Response is never part of that baseline.
    """
    ws.send(json.dumps({"@type": "WebSocketPushEnable", **arguments}))
    answer = ask(ws, {"@type": "Request", "id": "enabled", "using": [CORE], "methodCalls": []})
    assert answer["@type"] == "Response" and answer["requestId"] == "enabled", answer


def test_request_and_response_with_ids(socket: ClientConnection, alice: Person) -> None:
    """A Request is answered by a Response with its requestId, like the HTTP API."""
    assert socket.subprotocol == "jmap"
    answer = ask(
        socket,
        {
            "@type": "Request",
            "id": "R1",
            "using": [CORE, MAIL],
            "methodCalls": [
                ["Core/echo", {"hello": True}, "e"],
                ["Mailbox/get", {"accountId": alice.jmap_account, "ids": []}, "m"],
            ],
        },
    )
    assert answer["@type"] == "Response" and answer["requestId"] == "R1"
    assert answer["methodResponses"][0] == ["Core/echo", {"hello": True}, "e"]
    assert answer["methodResponses"][1][0] == "Mailbox/get"
    assert answer["sessionState"]


def test_request_errors(socket: ClientConnection) -> None:
    """Not JSON, not a request, an unknown capability and binary frames are RequestErrors."""
    socket.send("The quick brown fox")
    error = json.loads(socket.recv(timeout=30))
    assert error["@type"] == "RequestError" and error["requestId"] is None
    assert error["type"] == "urn:ietf:params:jmap:error:notJSON" and error["status"] == 400
    error = ask(socket, {"@type": "Nonsense", "id": "x"})
    assert (error["type"], error["requestId"]) == ("urn:ietf:params:jmap:error:notRequest", "x")
    error = ask(socket, {"@type": "Request", "id": "u", "using": ["urn:x"], "methodCalls": []})
    assert error["type"] == "urn:ietf:params:jmap:error:unknownCapability"
    assert error["requestId"] == "u"
    socket.send(b"\x00binary")
    assert json.loads(socket.recv(timeout=30))["type"] == "urn:ietf:params:jmap:error:notJSON"


def test_push_over_the_socket(socket: ClientConnection, client: Jmap, alice: Person) -> None:
    """After WebSocketPushEnable a change arrives as a StateChange with a pushState."""
    enable_push(socket, dataTypes=["Email"])
    message = email_id(alice.messages["hello"])
    done = client.call("Email/set", {"update": {message: {"keywords/$flagged": True}}})
    change = json.loads(socket.recv(timeout=30))
    assert change["@type"] == "StateChange"
    assert change["changed"][alice.jmap_account] == {"Email": done["newState"]}
    assert change["pushState"]
    socket.send(json.dumps({"@type": "WebSocketPushDisable"}))
    answer = ask(socket, {"@type": "Request", "using": [CORE], "methodCalls": []})
    assert answer["@type"] == "Response" and "requestId" not in answer


def test_push_state_resumes(client: Jmap, alice: Person) -> None:
    """Enabling with an older pushState sends the types that moved since at once."""
    url = client.session["capabilities"][WEBSOCKET]["url"]
    state = client.state("Email")
    client.call(
        "Email/set", {"update": {email_id(alice.messages["other"]): {"keywords/$seen": True}}}
    )
    with connect(url, subprotocols=["jmap"], additional_headers=basic(alice)) as ws:  # type: ignore[list-item]
        ws.send(json.dumps({"@type": "WebSocketPushEnable", "pushState": state}))
        change = json.loads(ws.recv(timeout=30))
    assert "Email" in change["changed"][alice.jmap_account]


def test_upgrade_needs_credentials_subprotocol_and_own_origin(
    server: Server, client: Jmap, alice: Person
) -> None:
    """No credentials is 401, no jmap subprotocol 400, another site's Origin 403."""
    url = client.session["capabilities"][WEBSOCKET]["url"]
    cases: list[tuple[dict[str, Any], int]] = [
        ({"subprotocols": ["jmap"]}, 401),
        ({"additional_headers": basic(alice)}, 400),
        (
            {
                "subprotocols": ["jmap"],
                "additional_headers": basic(alice),
                "origin": "https://evil.example",
            },
            403,
        ),
    ]
    for options, status in cases:
        with pytest.raises(InvalidStatus) as refused:
            connect(url, **options)
        assert refused.value.response.status_code == status


def test_a_message_over_max_size_request_is_a_limit_error(store: Store, alice: Person) -> None:
    """A message larger than maxSizeRequest is answered with the `limit` RequestError."""
    config = JmapConfig(poll_interval=0.05, limits=Limits(max_size_request=2000))
    serving = run_server(store, jmap=config)
    small = next(serving)
    try:
        with Jmap(small, alice) as client:
            url = client.session["capabilities"][WEBSOCKET]["url"]
        with connect(url, subprotocols=["jmap"], additional_headers=basic(alice)) as ws:  # type: ignore[list-item]
            big = {"@type": "Request", "id": "big", "using": [CORE], "methodCalls": []}
            error = ask(ws, {**big, "padding": "x" * 3000})
            assert error["type"] == "urn:ietf:params:jmap:error:limit"
            assert (error["limit"], error["requestId"]) == ("maxSizeRequest", None)
            assert ask(ws, big)["requestId"] == "big"
    finally:
        next(serving, None)


def test_push_of_vacation_identity_and_email_delivery(
    socket: ClientConnection, client: Jmap, store: Store, alice: Person
) -> None:
    """VacationResponse and Identity changes are pushed; EmailDelivery moves only for new mail."""
    enable_push(socket, dataTypes=["VacationResponse", "Identity", "EmailDelivery"])
    vacation = "urn:ietf:params:jmap:vacationresponse"
    done = client.call(
        "VacationResponse/set",
        {"update": {"singleton": {"isEnabled": True}}},
        using=[CORE, MAIL, vacation],
    )
    change = json.loads(socket.recv(timeout=30))
    assert change["changed"][alice.jmap_account] == {"VacationResponse": done["newState"]}
    flagged = email_id(alice.messages["hello"])
    client.call("Email/set", {"update": {flagged: {"keywords/$flagged": True}}})
    ingest(store, (alice.user_id, alice.account_id, alice.inbox), [("new", make_message("n@x"))])
    change = json.loads(socket.recv(timeout=30))
    assert set(change["changed"][alice.jmap_account]) == {"EmailDelivery"}


def test_wss_over_tls(tls_server: Server, alice: Person) -> None:
    """Over https the session names a wss URL, and a client trusting the certificate uses it."""
    with Jmap(tls_server, alice) as client:
        url = client.session["capabilities"][WEBSOCKET]["url"]
    assert url.startswith("wss://")
    assert isinstance(tls_server.verify, str)
    context = ssl.create_default_context(cafile=tls_server.verify)
    with connect(
        url,
        subprotocols=["jmap"],  # type: ignore[list-item]
        additional_headers=basic(alice),
        ssl=context,
    ) as ws:
        answer = ask(ws, {"@type": "Request", "id": "t", "using": [CORE], "methodCalls": []})
    assert answer["requestId"] == "t"
