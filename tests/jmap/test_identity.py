"""Identity/get, /changes and /set (RFC 8621 §6) over real HTTP, on both stores."""

from __future__ import annotations

from typing import Any

from mailroom.jmap.stored_email import jmap_account
from mailroom.store.engine import Store
from mailroom.store.models import Account, Identity
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
    again = result["created"]["again"]
    assert again["mayDelete"] is True  # a second identity of the account's own address
    emails = sorted(i["email"] for i in call(client, "Identity/get")["list"])
    assert emails == ["al@example.org", "alice@example.org", "alice@example.org"]
    changes = call(client, "Identity/changes", sinceState=state)
    assert sorted(changes["created"]) == sorted([created["id"], again["id"]])
    (default,) = [i for i in call(client, "Identity/get")["list"] if not i["mayDelete"]]
    assert default["email"] == "alice@example.org" and default["id"] != again["id"]
    gone = call(
        client, "Identity/set", destroy=[created["id"], again["id"], default["id"], "I424242"]
    )
    assert gone["destroyed"] == [created["id"], again["id"]]
    assert gone["notDestroyed"][default["id"]]["type"] == "forbidden"
    assert gone["notDestroyed"]["I424242"]["type"] == "notFound"
    after = call(client, "Identity/changes", sinceState=state)
    assert after["created"] == [] and after["destroyed"] == []  # created and gone: nothing
    later = call(client, "Identity/changes", sinceState=result["newState"])
    assert sorted(later["destroyed"]) == sorted([created["id"], again["id"]])


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


def test_several_identities_for_one_address(client: Jmap, store: Store, alice: Person) -> None:
    """RFC 8621 §6: one address may have identities with other names and signatures."""
    give_address(store, alice, "alice@example.org")
    (default,) = call(client, "Identity/get")["list"]
    result = call(
        client,
        "Identity/set",
        create={
            "work": {"email": "alice@example.org", "name": "Alice (work)", "textSignature": "W"},
            "home": {"email": "ALICE@example.org", "name": "Alice (home)"},
        },
    )
    assert result["notCreated"] is None
    work, home = result["created"]["work"], result["created"]["home"]
    listed = call(client, "Identity/get", ids=[work["id"], home["id"], default["id"]])["list"]
    assert [(i["name"], i["mayDelete"]) for i in listed] == [
        ("Alice (work)", True),
        ("Alice (home)", True),
        (default["name"], False),
    ]
    assert listed[0]["textSignature"] == "W" and listed[1]["email"] == "ALICE@example.org"
    updated = call(client, "Identity/set", update={work["id"]: {"name": "Alice at work"}})
    assert updated["updated"] == {work["id"]: None}
    again = call(client, "Identity/get", ids=[default["id"], home["id"]])["list"]
    assert [i["name"] for i in again] == [default["name"], "Alice (home)"]


def test_new_address_makes_a_new_default(client: Jmap, store: Store, alice: Person) -> None:
    """When the account's address changes, the old default may be deleted; the new one not."""
    give_address(store, alice, "alice@example.org")
    (old,) = call(client, "Identity/get")["list"]
    state = call(client, "Identity/get", ids=[])["state"]
    give_address(store, alice, "alice@example.net")
    listed = call(client, "Identity/get")["list"]
    assert [(i["email"], i["mayDelete"]) for i in listed] == [
        ("alice@example.org", True),
        ("alice@example.net", False),
    ]
    changes = call(client, "Identity/changes", sinceState=state)
    assert changes["updated"] == [old["id"]] and changes["created"] == [listed[1]["id"]]
    assert call(client, "Identity/set", destroy=[old["id"]])["destroyed"] == [old["id"]]
    (left,) = call(client, "Identity/get")["list"]
    assert left["email"] == "alice@example.net"


def test_the_jmap_account_has_no_identity(client: Jmap, store: Store, alice: Person) -> None:
    """Email/import's per-user JMAP account has no address: no identity is offered for it."""
    give_address(store, alice, "alice@example.org")
    with store.session() as session:
        account = jmap_account(session, alice.user_id)
        # A row made for it before it was left out stays hidden too.
        stale = Identity(user_id=alice.user_id, account_id=account.id, email="", is_default=True)
        session.add(stale)
        session.flush()
        stale_id = f"I{stale.id}"
    listed = call(client, "Identity/get")["list"]
    assert [i["email"] for i in listed] == ["alice@example.org"]
    assert call(client, "Identity/get", ids=[stale_id])["notFound"] == [stale_id]
    refused = call(client, "Identity/set", update={stale_id: {"name": "x"}}, destroy=[stale_id])
    assert refused["notUpdated"][stale_id]["type"] == "notFound"
    assert refused["notDestroyed"][stale_id]["type"] == "notFound"


def test_concurrent_first_looks_make_one_default(
    client: Jmap, store: Store, alice: Person, server: Any
) -> None:
    """Requests racing to create an account's default identity leave exactly one."""
    from concurrent.futures import ThreadPoolExecutor

    give_address(store, alice, "alice@example.org")

    def look(_: int) -> list[dict[str, Any]]:
        with Jmap(server, alice) as own:
            listed: list[dict[str, Any]] = call(own, "Identity/get")["list"]
            return listed

    with ThreadPoolExecutor(max_workers=6) as pool:
        seen = list(pool.map(look, range(6)))
    assert all(len(listed) == 1 for listed in seen)
    assert len({listed[0]["id"] for listed in seen}) == 1
    with store.session() as session:
        rows = session.query(Identity).filter(Identity.user_id == alice.user_id).all()
    assert [(r.email, r.is_default) for r in rows] == [("alice@example.org", True)]
