"""Error paths over raw HTTP: request problems (RFC 7807), method errors, other users' ids."""

from __future__ import annotations

from typing import Any

from tests.jmap.conftest import CORE, MAIL, USING, Jmap, Person, Server, email_id, problem


def test_unknown_capability_is_a_requestproblem(client: Jmap) -> None:
    """A `using` naming a capability the server lacks fails the whole request."""
    answer = client.post(
        {"using": [CORE, "urn:example:nope"], "methodCalls": [["Core/echo", {}, "0"]]}
    )
    assert "urn:example:nope" in str(problem(answer, "unknownCapability")["detail"])


def test_not_json_and_not_a_request(client: Jmap) -> None:
    """Bytes that are not JSON are notJSON; JSON of the wrong shape is notRequest."""
    raw = client.http.post(
        client.session["apiUrl"], content=b"{not json", headers={"content-type": "application/json"}
    )
    problem(raw, "notJSON")
    documents: list[Any] = [
        [],
        {"using": CORE, "methodCalls": []},
        {"using": [CORE], "methodCalls": [["Core/echo", {}]]},
        {"using": [CORE], "methodCalls": [["Core/echo", [], "0"]]},
    ]
    for document in documents:
        problem(client.post(document), "notRequest")


def test_too_many_calls_is_a_limitproblem(client: Jmap) -> None:
    """More calls than maxCallsInRequest is a limit problem naming the limit."""
    most = client.session["capabilities"][CORE]["maxCallsInRequest"]
    calls = [["Core/echo", {}, str(i)] for i in range(most + 1)]
    body = problem(client.post({"using": [CORE], "methodCalls": calls}), "limit")
    assert body["limit"] == "maxCallsInRequest"


def test_unknown_method_and_missing_capability_in_using(client: Jmap) -> None:
    """An unknown method, or one whose capability is not in `using`, is unknownMethod."""
    responses = client.calls(
        ["Foo/bar", {}, "a"],
        ["Mailbox/get", {"accountId": client.account}, "b"],
        ["Core/echo", {"hello": True}, "c"],
        using=[CORE],
    )
    assert responses[0] == ["error", responses[0][1], "a"]
    assert responses[0][1]["type"] == "unknownMethod"
    assert responses[1][1]["type"] == "unknownMethod"
    assert responses[2] == ["Core/echo", {"hello": True}, "c"]


def test_bad_result_references(client: Jmap) -> None:
    """Unknown call ids, wrong names, bad paths and foo+#foo are refused; later calls still run."""
    responses = client.calls(
        ["Email/query", {"accountId": client.account}, "q"],
        [
            "Email/get",
            {
                "accountId": client.account,
                "#ids": {"resultOf": "zz", "name": "Email/query", "path": "/ids"},
            },
            "1",
        ],  # noqa: E501
        [
            "Email/get",
            {
                "accountId": client.account,
                "#ids": {"resultOf": "q", "name": "Email/get", "path": "/ids"},
            },
            "2",
        ],  # noqa: E501
        [
            "Email/get",
            {
                "accountId": client.account,
                "#ids": {"resultOf": "q", "name": "Email/query", "path": "/nothing"},
            },
            "3",
        ],  # noqa: E501
        [
            "Email/get",
            {
                "accountId": client.account,
                "ids": [],
                "#ids": {"resultOf": "q", "name": "Email/query", "path": "/ids"},
            },
            "4",
        ],  # noqa: E501
        [
            "Email/get",
            {
                "accountId": client.account,
                "#ids": {"resultOf": "q", "name": "Email/query", "path": "/ids"},
                "properties": ["id"],
            },
            "5",
        ],  # noqa: E501
    )
    assert [r[1]["type"] for r in responses[1:4]] == ["invalidResultReference"] * 3
    assert responses[4][1]["type"] == "invalidArguments"
    assert responses[5][0] == "Email/get" and len(responses[5][1]["list"]) == 4


def test_wildcard_path_maps_and_flattens(client: Jmap) -> None:
    """`/list/*/threadId` feeds Thread/get, and `/list/*/emailIds` (arrays) is flattened."""
    responses = client.calls(
        ["Email/query", {"accountId": client.account}, "q"],
        [
            "Email/get",
            {
                "accountId": client.account,
                "#ids": {"resultOf": "q", "name": "Email/query", "path": "/ids"},
                "properties": ["threadId"],
            },
            "g",
        ],  # noqa: E501
        [
            "Thread/get",
            {
                "accountId": client.account,
                "#ids": {"resultOf": "g", "name": "Email/get", "path": "/list/*/threadId"},
            },
            "t",
        ],  # noqa: E501
        [
            "Email/get",
            {
                "accountId": client.account,
                "#ids": {"resultOf": "t", "name": "Thread/get", "path": "/list/*/emailIds"},
                "properties": ["id"],
            },
            "e",
        ],  # noqa: E501
    )
    threads = responses[2][1]["list"]
    assert len(threads) == 3 and not responses[2][1]["notFound"]  # repeated ids answered once
    assert {e["id"] for e in responses[3][1]["list"]} == set(responses[0][1]["ids"])


def test_stale_if_in_state_is_state_mismatch(client: Jmap, alice: Person) -> None:
    """Email/set with an old ifInState changes nothing and answers stateMismatch."""
    old = client.state("Email")
    target = email_id(alice.messages["hello"])
    first = client.call(
        "Email/set", {"ifInState": old, "update": {target: {"keywords/$seen": True}}}
    )
    assert first["oldState"] == old and first["newState"] != old
    again = client.call(
        "Email/set", {"ifInState": old, "update": {target: {"keywords/$seen": None}}}
    )
    assert again["error"]["type"] == "stateMismatch"
    kept = client.call("Email/get", {"ids": [target], "properties": ["keywords"]})
    assert kept["list"][0]["keywords"] == {"$seen": True}


def test_another_users_ids_are_not_found(
    server: Server, client: Jmap, alice: Person, bob: Person
) -> None:
    """Bob's account, emails, threads, mailboxes and blobs do not exist for Alice."""
    bobs_email = email_id(bob.messages["hello"])
    assert client.call("Email/get", {"ids": [bobs_email]})["notFound"] == [bobs_email]
    with Jmap(server, bob) as bobs_client:
        bobs_thread = bobs_client.call(
            "Email/get", {"ids": [bobs_email], "properties": ["threadId"]}
        )
    thread = bobs_thread["list"][0]["threadId"]
    assert client.call("Thread/get", {"ids": [thread]})["notFound"] == [thread]
    assert client.call("Mailbox/get", {"ids": [f"L{bob.inbox}"]})["notFound"] == [f"L{bob.inbox}"]
    changed = client.call(
        "Email/set", {"update": {bobs_email: {"keywords/$seen": True}}, "destroy": [bobs_email]}
    )
    assert changed["notUpdated"][bobs_email]["type"] == "notFound"
    assert changed["notDestroyed"][bobs_email]["type"] == "notFound"
    snippets = client.call(
        "SearchSnippet/get", {"emailIds": [bobs_email], "filter": {"text": "walrus"}}
    )
    assert snippets["notFound"] == [bobs_email]
    (foreign,) = client.calls(["Mailbox/get", {"accountId": bob.jmap_account}, "x"])
    assert foreign[1]["type"] == "accountNotFound"
    blob = client.http.get(
        f"{server.base}/jmap/download/{bob.jmap_account}/R{bob.messages['hello']}/m.eml"
    )
    assert blob.status_code == 404
    own_account = client.http.get(
        f"{server.base}/jmap/download/{client.account}/R{bob.messages['hello']}/m.eml"
    )
    assert own_account.status_code == 404
    with Jmap(server, bob) as bobs_client:
        bob_view = bobs_client.call("Email/get", {"ids": [bobs_email], "properties": ["keywords"]})
    assert bob_view["list"][0]["keywords"] == {}


def test_invalid_arguments(client: Jmap) -> None:
    """Misspelled arguments, bad types, unsupported filters and sorts fail plainly."""
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("Email/query", {"collapse_threads": True}, "invalidArguments"),
        ("Email/query", {"filter": {"header": ["X", "y", "z"]}}, "invalidArguments"),
        ("Email/query", {"filter": {"nosuch": 1}}, "unsupportedFilter"),
        ("Email/query", {"filter": {"category": "social"}}, "unsupportedFilter"),
        ("Email/query", {"sort": [{"property": "nosuch"}]}, "unsupportedSort"),
        ("Email/query", {"sort": [{"property": "hasKeyword"}]}, "invalidArguments"),
        ("Email/query", {"limit": -1}, "invalidArguments"),
        ("Email/query", {"anchor": "M999999"}, "anchorNotFound"),
        ("Email/changes", {"sinceState": "nonsense"}, "cannotCalculateChanges"),
        ("Email/changes", {"sinceState": "0", "maxChanges": 0}, "invalidArguments"),
        ("Email/get", {"ids": "M1"}, "invalidArguments"),
        ("Email/get", {"properties": ["nope"]}, "invalidArguments"),
        ("Thread/get", {"ids": None}, "invalidArguments"),
    ]
    for name, args, expected in cases:
        assert client.call(name, args)["error"]["type"] == expected, (name, args)
    assert (
        client.call(
            "Email/query",
            {"filter": {"category": "social"}},
            using=[*USING, "urn:mailroom:jmap:tabs"],
        )["ids"]
        == []
    )  # noqa: E501
    missing_account = client.calls(["Mailbox/get", {}, "m"])[0][1]
    assert missing_account["type"] == "invalidArguments"
    assert MAIL in client.session["capabilities"]


def test_identities_and_sending_is_refused_plainly(client: Jmap, alice: Person) -> None:
    """Identity/get lists one identity per mail account; a submission from an account
    without an address is `forbiddenFrom`; an email created without mailboxIds is
    invalidProperties."""
    using = [*USING, "urn:ietf:params:jmap:submission"]
    identities = client.call("Identity/get", {"ids": None}, using=using)
    assert [i["id"] for i in identities["list"]] == [f"I{alice.account_id}"]
    sent = client.call(
        "EmailSubmission/set",
        {"create": {"s1": {"identityId": f"I{alice.account_id}", "emailId": "M1"}}},
        using=using,
    )
    assert sent["notCreated"]["s1"]["type"] == "forbiddenFrom"
    assert sent["notCreated"]["s1"]["description"]
    created = client.call("Email/set", {"create": {"d": {"subject": "draft"}}})
    assert created["notCreated"]["d"]["type"] == "invalidProperties"
    assert "mailboxIds" in created["notCreated"]["d"]["properties"]
    refused = client.call(
        "Email/set",
        {
            "update": {
                email_id(alice.messages["hello"]): {"keywords/bad(keyword": True},
                email_id(alice.messages["reply"]): {"subject": "new"},
                email_id(alice.messages["other"]): {"mailboxIds": {}},
            }
        },
    )
    kinds = {k: v["type"] for k, v in refused["notUpdated"].items()}
    assert set(kinds.values()) == {"invalidProperties"} and len(kinds) == 3
