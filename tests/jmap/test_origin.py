"""Cross-site requests over real HTTP: JSON only on the API, Origin refused unless allow-listed."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from mailroom.jmap.app import JmapConfig
from mailroom.store.engine import Store
from tests.jmap.conftest import PASSWORD, USING, Jmap, Person, Server, email_id, run_server

EVIL = "https://evil.example"
FRIEND = "https://webmail.example.org"


def _star(client: Jmap, alice: Person) -> dict[str, object]:
    """An Email/set that stars Alice's hello message."""
    return {
        "using": USING,
        "methodCalls": [
            [
                "Email/set",
                {
                    "accountId": client.account,
                    "update": {email_id(alice.messages["hello"]): {"keywords/$flagged": True}},
                },
                "s",
            ]
        ],
    }


def _flagged(client: Jmap, alice: Person) -> bool:
    got = client.call("Email/get", {"ids": [email_id(alice.messages["hello"])]})
    return bool(got["list"][0]["keywords"].get("$flagged"))


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
)
def test_api_takes_only_application_json(
    client: Jmap, alice: Person, content_type: str | None
) -> None:
    """A body sent as text, a form or with no type is notJSON (400), and nothing changes."""
    import json

    headers = {"content-type": content_type} if content_type else {}
    answer = client.http.post(
        client.session["apiUrl"],
        content=json.dumps(_star(client, alice)).encode(),
        headers=headers,
    )
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    body = answer.json()
    assert body["type"] == "urn:ietf:params:jmap:error:notJSON"
    assert "application/json" in body["detail"]
    assert not _flagged(client, alice)


def test_api_accepts_json_with_a_charset(client: Jmap) -> None:
    """`application/json; charset=utf-8` (any case) is JSON; another charset is not."""
    body = b'{"using": ["urn:ietf:params:jmap:core"], "methodCalls": [["Core/echo", {}, "0"]]}'
    for value in ("application/json; charset=utf-8", 'Application/JSON;charset="UTF-8"'):
        answer = client.http.post(
            client.session["apiUrl"], content=body, headers={"content-type": value}
        )
        assert answer.status_code == 200, (value, answer.text)
    latin = client.http.post(
        client.session["apiUrl"],
        content=body,
        headers={"content-type": "application/json; charset=latin1"},
    )
    assert latin.status_code == 400
    assert latin.json()["type"] == "urn:ietf:params:jmap:error:notJSON"


def test_a_foreign_origin_is_refused_everywhere(
    server: Server, client: Jmap, alice: Person
) -> None:
    """Every JMAP endpoint answers 403 to a request whose Origin is another site's."""
    auth = (alice.name, PASSWORD)
    headers = {"origin": EVIL}
    blob = f"R{alice.messages['hello']}"
    answers = {
        "api": httpx.post(
            client.session["apiUrl"], json=_star(client, alice), headers=headers, auth=auth
        ),
        "session": httpx.get(f"{server.base}/.well-known/jmap", headers=headers, auth=auth),
        "download": httpx.get(
            f"{server.base}/jmap/download/{client.account}/{blob}/m.eml", headers=headers, auth=auth
        ),
        "upload": httpx.post(
            f"{server.base}/jmap/upload/{client.account}", content=b"x", headers=headers, auth=auth
        ),
        "eventsource": httpx.get(
            f"{server.base}/jmap/eventsource?types=*&closeafter=state&ping=0",
            headers=headers,
            auth=auth,
        ),
        "null": httpx.post(
            client.session["apiUrl"],
            json=_star(client, alice),
            headers={"origin": "null"},
            auth=auth,
        ),
    }
    for where, answer in answers.items():
        assert answer.status_code == 403, (where, answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json"), where
        assert "Origin" in answer.json()["detail"], where
        assert "access-control-allow-origin" not in answer.headers, where
    assert not _flagged(client, alice)


def test_the_servers_own_origin_is_welcome(server: Server, client: Jmap, alice: Person) -> None:
    """A request from the server's own origin (its web page) works as without Origin."""
    answer = client.http.post(
        client.session["apiUrl"], json=_star(client, alice), headers={"origin": server.base}
    )
    assert answer.status_code == 200, answer.text
    assert _flagged(client, alice)


@pytest.fixture
def cors_server(store: Store) -> Iterator[Server]:
    """A server whose operator allow-listed one web client's origin."""
    yield from run_server(store, jmap=JmapConfig(poll_interval=0.05, cors_origins=(FRIEND,)))


def test_an_allow_listed_origin_gets_cors(cors_server: Server, alice: Person) -> None:
    """Preflight and requests of an allow-listed origin get CORS headers; others still 403."""
    api = f"{cors_server.base}/jmap/api"
    preflight = httpx.options(
        api,
        headers={
            "origin": FRIEND,
            "access-control-request-method": "POST",
            "access-control-request-headers": "authorization, content-type",
        },
    )
    assert preflight.status_code == 204, preflight.text
    assert preflight.headers["access-control-allow-origin"] == FRIEND
    allowed_headers = preflight.headers["access-control-allow-headers"].lower()
    assert "authorization" in allowed_headers and "content-type" in allowed_headers
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "origin" in preflight.headers["vary"].lower()
    assert "access-control-allow-credentials" not in preflight.headers

    with Jmap(cors_server, alice) as client:
        answer = client.http.post(api, json=_star(client, alice), headers={"origin": FRIEND})
        assert answer.status_code == 200, answer.text
        assert answer.headers["access-control-allow-origin"] == FRIEND
        assert "origin" in answer.headers["vary"].lower()
        session = client.http.get(
            f"{cors_server.base}/.well-known/jmap", headers={"origin": FRIEND}
        )
        assert session.headers["access-control-allow-origin"] == FRIEND

        refused = httpx.options(
            api, headers={"origin": EVIL, "access-control-request-method": "POST"}
        )
        assert refused.status_code == 403
        assert "access-control-allow-origin" not in refused.headers
        assert (
            client.http.post(api, json=_star(client, alice), headers={"origin": EVIL}).status_code
            == 403
        )
