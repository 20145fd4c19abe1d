"""Identity/get, /changes and /set (RFC 8621 §6) over real HTTP, on both stores."""

from __future__ import annotations

from typing import Any

from mailroom.store.engine import Store
from mailroom.store.models import Account
from tests.jmap.conftest import USING, Jmap, Person

SUBMISSION = "urn:ietf:params:jmap:submission"
WITH_SUBMISSION = [*USING, SUBMISSION]


def call(client: Jmap, name: str, **args: Any) -> Any:
    """One Identity method call."""
    return client.call(name, args, using=WITH_SUBMISSION)


def give_address(store: Store, person: Person, email: str, **more: Any) -> None:
    """Set the account's address (and any other settings) as a provider would."""
    with store.session() as session:
        account = session.get(Account, person.account_id)
        assert account is not None
        account.settings = {**(account.settings or {}), "email": email, **more}


def test_one_identity_per_account_address_and_stable_ids(
    client: Jmap, store: Store, alice: Person
) -> None:
    """The account's address is an identity that cannot be deleted; its id does not change."""
    give_address(store, alice, "alice@example.org", display_name="Alice Liddell")
    first = call(client, "Identity/get", ids=None)
    (identity,) = first["list"]
    assert identity["email"] == "alice@example.org"
    assert identity["name"] == "Alice Liddell"
    assert identity["mayDelete"] is False
    assert identity["replyTo"] is None and identity["textSignature"] == ""
    again = call(client, "Identity/get", ids=[identity["id"], "I999999", "nonsense"])
    assert again["list"] == [identity]
    assert again["notFound"] == ["I999999", "nonsense"]
    assert again["state"] == first["state"]


def test_update_name_signatures_and_addresses(client: Jmap, store: Store, alice: Person) -> None:
    """Names, signatures, replyTo and bcc are kept; email and mayDelete are not the client's."""
    give_address(store, alice, "alice@example.org")
    (identity,) = call(client, "Identity/get")["list"]
    state = call(client, "Identity/get", ids=[])["state"]
    patch = {
        "name": "Alice L.",
        "textSignature": "-- \nAlice",
        "htmlSignature": "<b>Alice</b>",
        "replyTo": [{"name": None, "email": "replies@example.org"}],
        "bcc": [{"name": "Archive", "email": "archive@example.org"}],
    }
    done = call(client, "Identity/set", ifInState=state, update={identity["id"]: patch})
    assert done["updated"] == {identity["id"]: None}
    assert done["oldState"] == state != done["newState"]
    (stored,) = call(client, "Identity/get")["list"]
    assert {k: stored[k] for k in patch} == patch
    refused = call(
        client,
        "Identity/set",
        update={identity["id"]: {"email": "x@example.org", "mayDelete": True, "bcc": "no"}},
    )["notUpdated"][identity["id"]]
    assert refused["type"] == "invalidProperties"
    assert sorted(refused["properties"]) == ["bcc", "email", "mayDelete"]
    stale = call(client, "Identity/set", ifInState=state, update={identity["id"]: {"name": "x"}})
    assert stale["error"]["type"] == "stateMismatch"
    changes = call(client, "Identity/changes", sinceState=state)
    assert changes["updated"] == [identity["id"]] and changes["created"] == []
    assert changes["newState"] == done["newState"]


def test_create_only_for_owned_addresses_and_destroy(
    client: Jmap, store: Store, alice: Person
) -> None:
    """An alias can become an identity (and be destroyed); a stranger's address cannot."""
    give_address(store, alice, "alice@example.org", aliases=["al@example.org"])
    state = call(client, "Identity/get", ids=[])["state"]
    result = call(
        client,
        "Identity/set",
        create={
            "alias": {"email": "al@example.org", "name": "Al"},
            "stranger": {"email": "mallory@evil.example"},
            "bad": {"name": 5},
            "again": {"email": "alice@example.org"},
        },
    )
    created = result["created"]["alias"]
    assert created["mayDelete"] is True and created["id"].startswith("I")
    assert created["textSignature"] == "" and "email" not in created
    assert result["notCreated"]["stranger"]["type"] == "forbiddenFrom"
    assert result["notCreated"]["bad"]["type"] == "invalidProperties"
    assert sorted(result["notCreated"]["bad"]["properties"]) == ["email", "name"]
    assert result["notCreated"]["again"]["type"] == "invalidProperties"
    emails = sorted(i["email"] for i in call(client, "Identity/get")["list"])
    assert emails == ["al@example.org", "alice@example.org"]
    changes = call(client, "Identity/changes", sinceState=state)
    assert changes["created"] == [created["id"]]
    (default,) = [i for i in call(client, "Identity/get")["list"] if not i["mayDelete"]]
    gone = call(client, "Identity/set", destroy=[created["id"], default["id"], "I424242"])
    assert gone["destroyed"] == [created["id"]]
    assert gone["notDestroyed"][default["id"]]["type"] == "forbidden"
    assert gone["notDestroyed"]["I424242"]["type"] == "notFound"
    after = call(client, "Identity/changes", sinceState=state)
    assert after["created"] == [] and after["destroyed"] == []  # created and gone: nothing
    later = call(client, "Identity/changes", sinceState=result["newState"])
    assert later["destroyed"] == [created["id"]]


def test_changes_refuses_unknown_states_and_other_accounts(client: Jmap) -> None:
    """A state the server never issued is cannotCalculateChanges; another account is unknown."""
    assert call(client, "Identity/changes", sinceState="99999999")["error"]["type"] == (
        "cannotCalculateChanges"
    )
    other = client.calls(["Identity/get", {"accountId": "u999"}, "c"], using=WITH_SUBMISSION)
    assert other[0][1]["type"] == "accountNotFound"


def test_other_users_identities_are_not_found(client: Jmap, bob: Person, server: Any) -> None:
    """Bob's identity id is notFound for Alice, for get, update and destroy alike."""
    with Jmap(server, bob) as bobs:
        (identity,) = call(bobs, "Identity/get")["list"]
    assert call(client, "Identity/get", ids=[identity["id"]])["notFound"] == [identity["id"]]
    result = call(
        client, "Identity/set", update={identity["id"]: {"name": "x"}}, destroy=[identity["id"]]
    )
    assert result["notUpdated"][identity["id"]]["type"] == "notFound"
    assert result["notDestroyed"][identity["id"]]["type"] == "notFound"
