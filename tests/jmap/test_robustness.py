"""Hostile requests over real HTTP cost only themselves: RFC errors, one log line, few streams."""

from __future__ import annotations

import base64
import json
import logging
import socket
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.jmap.conftest import CORE, PASSWORD, USING, Jmap, Person, Server, problem

JSON = {"content-type": "application/json"}


def _raw(client: Jmap, body: bytes) -> httpx.Response:
    return client.http.post(client.session["apiUrl"], content=body, headers=JSON)


def _query(client: Jmap, **args: Any) -> dict[str, Any]:
    result: dict[str, Any] = client.call("Email/query", args)
    return result


def test_json_nested_100000_deep_is_not_json(client: Jmap) -> None:
    """A body nested 100,000 deep is refused as notJSON before it is decoded."""
    deep = b'{"using": [], "methodCalls": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert "deep" in problem(_raw(client, deep), "notJSON")["detail"]


def test_filter_nested_900_deep_is_refused(client: Jmap) -> None:
    """A filter nested 900 deep is notJSON (too deep); 30 deep is an unsupportedFilter."""

    def nested(depth: int) -> dict[str, Any]:
        node: dict[str, Any] = {"hasKeyword": "$seen"}
        for _ in range(depth):
            node = {"operator": "NOT", "conditions": [node]}
        return node

    # Written by hand: json.dumps itself cannot encode 900 levels.
    deep = '{"operator": "NOT", "conditions": [' * 900 + '{"hasKeyword": "$seen"}' + "]}" * 900
    body = (
        f'{{"using": {json.dumps(USING)}, "methodCalls": [["Email/query", '
        f'{{"accountId": "{client.account}", "filter": {deep}}}, "q"]]}}'
    )
    problem(_raw(client, body.encode()), "notJSON")
    error = _query(client, filter=nested(30))["error"]
    assert error["type"] == "unsupportedFilter" and "deep" in error["description"]


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e999"])
def test_nan_and_infinity_are_not_json(client: Jmap, literal: bytes) -> None:
    """NaN, Infinity and numbers beyond a double are not I-JSON: notJSON, never 500."""
    body = b'{"using": ["%s"], "methodCalls": [["Core/echo", {"x": %s}, "0"]]}' % (
        CORE.encode(),
        literal,
    )
    problem(_raw(client, body), "notJSON")


def test_duplicate_names_and_lone_surrogates_are_not_json(client: Jmap) -> None:
    """I-JSON forbids duplicate member names and unpaired surrogates: notJSON, never 500."""
    duplicate = b'{"using": [], "using": [], "methodCalls": []}'
    problem(_raw(client, duplicate), "notJSON")
    lone = b'{"using": ["%s"], "methodCalls": [["Core/echo", {"x": "\\ud800"}, "0"]]}' % (
        CORE.encode()
    )
    problem(_raw(client, lone), "notJSON")
    paired = b'{"using": ["%s"], "methodCalls": [["Core/echo", {"x": "\\ud83d\\ude00"}, "0"]]}' % (
        CORE.encode()
    )
    assert _raw(client, paired).json()["methodResponses"][0][1] == {"x": "\U0001f600"}


def test_huge_filters_are_unsupported_not_server_fail(client: Jmap) -> None:
    """An OR of 20,000 conditions and 3,000 text conditions are unsupportedFilter."""
    many = {"operator": "OR", "conditions": [{"subject": f"s{i}"} for i in range(20_000)]}
    error = _query(client, filter=many)["error"]
    assert error["type"] == "unsupportedFilter" and "conditions" in error["description"]
    texts = {"operator": "AND", "conditions": [{"text": f"w{i}"} for i in range(3_000)]}
    error = _query(client, filter=texts)["error"]
    assert error["type"] == "unsupportedFilter" and "text" in error["description"]
    # Within the limits the same shapes work.
    fine = {"operator": "OR", "conditions": [{"subject": f"s{i}"} for i in range(200)]}
    assert "ids" in _query(client, filter=fine)
    words = {"operator": "OR", "conditions": [{"text": f"w{i}"} for i in range(32)]}
    assert "ids" in _query(client, filter=words)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("position", 10**30),
        ("position", -(2**53)),
        ("limit", 2**53),
        ("anchorOffset", 10**30),
    ],
)
def test_integers_beyond_2_53_are_invalid_arguments(client: Jmap, name: str, value: int) -> None:
    """JMAP Ints stop at 2^53-1 (RFC 8620 §1.3): a bigger one is invalidArguments."""
    args: dict[str, Any] = {name: value}
    if name == "anchorOffset":
        args["anchor"] = "M1"
    assert _query(client, **args)["error"]["type"] == "invalidArguments"
    assert "ids" in _query(client, position=2**53 - 1)


def test_big_integers_elsewhere_are_invalid_arguments(client: Jmap) -> None:
    """Sizes, maxChanges and maxBodyValueBytes over 2^53-1 are invalidArguments too."""
    huge = 10**30
    assert _query(client, filter={"minSize": huge})["error"]["type"] == "invalidArguments"
    state = client.state("Email")
    changes = client.call("Email/changes", {"sinceState": state, "maxChanges": huge})
    assert changes["error"]["type"] == "invalidArguments"
    got = client.call("Email/get", {"ids": [], "maxBodyValueBytes": huge})
    assert got["error"]["type"] == "invalidArguments"
    mailboxes = client.call("Mailbox/query", {"position": huge})
    assert mailboxes["error"]["type"] == "invalidArguments"


def test_a_pointer_of_100000_tokens_is_an_invalid_reference(client: Jmap) -> None:
    """A result-reference path of 100,000 tokens is invalidResultReference, not serverFail."""
    responses = client.calls(
        ["Email/query", {"accountId": client.account}, "q"],
        [
            "Email/get",
            {
                "accountId": client.account,
                "#ids": {"resultOf": "q", "name": "Email/query", "path": "/ids" * 100_000},
            },
            "g",
        ],
    )
    assert responses[1][0] == "error"
    assert responses[1][1]["type"] == "invalidResultReference"


def test_a_body_over_max_size_request_is_a_limit_before_it_is_read(client: Jmap) -> None:
    """A Content-Length over maxSizeRequest is a limit problem naming maxSizeRequest."""
    most = client.session["capabilities"][CORE]["maxSizeRequest"]
    body = problem(_raw(client, b" " * (most + 1)), "limit")
    assert body["limit"] == "maxSizeRequest"


@pytest.fixture
def captured(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """caplog that also hears uvicorn's own loggers (which do not propagate to the root)."""
    caplog.set_level(logging.INFO)
    loggers = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.error")]
    for logger in loggers:
        logger.addHandler(caplog.handler)
    yield caplog
    for logger in loggers:
        logger.removeHandler(caplog.handler)


def test_a_client_leaving_mid_body_logs_one_line(
    server: Server, alice: Person, captured: pytest.LogCaptureFixture
) -> None:
    """Ten clients that close mid-body log at most one line each and no traceback."""
    url = urlsplit(server.base)
    credentials = base64.b64encode(f"{alice.name}:{PASSWORD}".encode()).decode()
    captured.clear()
    for _ in range(10):
        with socket.create_connection((url.hostname or "127.0.0.1", url.port or 80)) as sock:
            sock.sendall(
                (
                    "POST /jmap/api HTTP/1.1\r\n"
                    f"Host: {url.netloc}\r\n"
                    f"Authorization: Basic {credentials}\r\n"
                    "Content-Type: application/json\r\n"
                    "Content-Length: 100000\r\n\r\n"
                    '{"using": ['
                ).encode()
            )
            time.sleep(0.05)
    time.sleep(0.5)
    records = [r for r in captured.records if r.levelno >= logging.INFO]
    assert len(records) <= 10, [r.getMessage() for r in records]
    assert not any(r.exc_info for r in records), [r.getMessage() for r in records]
    assert "Traceback" not in captured.text
    assert any("left before" in r.getMessage() for r in records)


def test_push_streams_per_user_are_capped(server: Server, client: Jmap, alice: Person) -> None:
    """More push streams than the cap get 429 with a limit problem; a freed slot is reusable."""
    cap = server.config.max_push_streams
    url = f"{server.base}/jmap/eventsource?types=*&closeafter=no&ping=0"
    auth = httpx.BasicAuth(alice.name, PASSWORD)
    with httpx.Client(auth=auth, timeout=10) as http:
        streams = [http.stream("GET", url) for _ in range(cap)]
        opened = [s.__enter__() for s in streams]
        try:
            assert all(r.status_code == 200 for r in opened)
            extra = http.get(url)
            assert extra.status_code == 429, extra.text
            problem = extra.json()
            assert problem["type"] == "urn:ietf:params:jmap:error:limit"
            assert problem["limit"] and problem["detail"]
            # The API itself is not affected by open streams.
            assert client.call("Mailbox/get", {"ids": []})["list"] == []
        finally:
            streams[0].__exit__(None, None, None)
        deadline = time.monotonic() + 5
        while True:
            with http.stream("GET", url) as again:
                if again.status_code == 200 or time.monotonic() > deadline:
                    assert again.status_code == 200
                    break
            time.sleep(0.1)
        for stream in streams[1:]:
            stream.__exit__(None, None, None)
