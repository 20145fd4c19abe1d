"""The create, update and destroy arguments of every Foo/set (RFC 8620 §5.3) over HTTP.

Each may be absent or null; given, it has its type or the whole call is
invalidArguments — an empty list is no create, false no destroy.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.jmap.conftest import CORE, MAIL, Jmap

SUBMISSION = "urn:ietf:params:jmap:submission"
VACATION = "urn:ietf:params:jmap:vacationresponse"
ACCOUNT_METHODS = ("Mailbox/set", "Email/set", "EmailSubmission/set", "VacationResponse/set")
USING = [CORE, MAIL, SUBMISSION, VACATION]
WRONG_TYPES: list[dict[str, Any]] = [
    {"create": []},
    {"create": "a"},
    {"create": 0},
    {"update": []},
    {"update": False},
    {"destroy": {}},
    {"destroy": "M1"},
    {"destroy": False},
    {"destroy": [1]},
]


def _set(client: Jmap, method: str, args: dict[str, Any]) -> list[Any]:
    account = {} if method == "PushSubscription/set" else {"accountId": client.account}
    (response,) = client.calls([method, {**account, **args}, "c"], using=USING)
    return response


@pytest.mark.parametrize("method", [*ACCOUNT_METHODS, "PushSubscription/set"])
def test_wrong_types_are_invalid_arguments(client: Jmap, method: str) -> None:
    """A non-object create or update, a non-list destroy: invalidArguments for the whole call."""
    for args in WRONG_TYPES:
        name, answer, _tag = _set(client, method, args)
        assert (name, answer["type"]) == ("error", "invalidArguments"), (method, args, answer)


@pytest.mark.parametrize("method", [*ACCOUNT_METHODS, "PushSubscription/set"])
def test_null_and_empty_arguments_ask_for_nothing(client: Jmap, method: str) -> None:
    """null, {} and [] are nothing to create, update or destroy."""
    nothing: list[dict[str, Any]] = [{}, {"create": None, "update": None, "destroy": None}]
    for args in [*nothing, {"create": {}, "update": {}, "destroy": []}]:
        name, answer, _tag = _set(client, method, args)
        assert name == method, answer
        assert answer["created"] is None and answer["notCreated"] is None, answer
        assert answer["destroyed"] is None and answer["notDestroyed"] is None, answer


def test_non_object_creation_is_refused_for_mailboxes_alone(client: Jmap) -> None:
    """Mailbox/set refuses a creation that is no object; Email/set refuses only that email."""
    name, answer, _tag = _set(client, "Mailbox/set", {"create": {"k": []}})
    assert (name, answer["type"]) == ("error", "invalidArguments")
    name, answer, _tag = _set(client, "Email/set", {"create": {"k": []}})
    assert name == "Email/set" and answer["notCreated"]["k"]["type"] == "invalidProperties"


@pytest.mark.parametrize("method", ACCOUNT_METHODS)
def test_if_in_state_is_a_string_or_null(client: Jmap, method: str) -> None:
    """A stale ifInState is stateMismatch, one that is no string invalidArguments."""
    for value, expected in (("999999", "stateMismatch"), (7, "invalidArguments")):
        name, answer, _tag = _set(client, method, {"ifInState": value})
        assert (name, answer["type"]) == ("error", expected), (method, value, answer)
    name, answer, _tag = _set(client, method, {"ifInState": None})
    assert name == method, answer


def test_email_import_checks_if_in_state_alike(client: Jmap) -> None:
    """Email/import reads ifInState as every /set does."""
    for value, expected in (("999999", "stateMismatch"), (7, "invalidArguments")):
        name, answer, _tag = _set(client, "Email/import", {"emails": {}, "ifInState": value})
        assert (name, answer["type"]) == ("error", expected), (value, answer)
