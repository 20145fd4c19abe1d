"""Blob/copy (RFC 8620 §6.3) over real HTTP: one account per user, errors per RFC."""

from __future__ import annotations

from typing import Any

from tests.jmap.conftest import Jmap, Person, Server, upload

CORE_ONLY = ["urn:ietf:params:jmap:core"]


def copy(client: Jmap, blob_ids: object, **args: object) -> Any:
    """Blob/copy from and into the client's account unless the arguments say otherwise."""
    arguments = {"fromAccountId": client.account, "blobIds": blob_ids, **args}
    return client.call("Blob/copy", arguments, using=CORE_ONLY)


def test_copy_into_the_same_account_keeps_the_blob_ids(client: Jmap, alice: Person) -> None:
    """Uploads and raw messages copy into the same account under their own ids."""
    uploaded = upload(client, b"to copy").json()["blobId"]
    raw = f"R{alice.messages['hello']}"
    result = copy(client, [uploaded, raw])
    assert result["fromAccountId"] == client.account
    assert result["accountId"] == client.account
    assert result["copied"] == {uploaded: uploaded, raw: raw}
    assert result["notCopied"] is None


def test_unknown_and_foreign_blobs_are_not_found(
    server: Server, alice: Person, bob: Person
) -> None:
    """A blob id that names nothing, or another user's blob, is notFound in notCopied."""
    with Jmap(server, alice) as mine, Jmap(server, bob) as theirs:
        secret = upload(mine, b"alice only").json()["blobId"]
        result = copy(theirs, [secret, "Rnonsense", f"R{alice.messages['hello']}"])
        assert result["copied"] is None
        not_copied = result["notCopied"]
        assert {e["type"] for e in not_copied.values()} == {"notFound"}
        assert len(not_copied) == 3


def test_other_accounts_are_method_errors(client: Jmap, bob: Person) -> None:
    """fromAccountId of another user is fromAccountNotFound; accountId, accountNotFound."""
    source = copy(client, [], fromAccountId=bob.jmap_account)
    assert source["error"]["type"] == "fromAccountNotFound"
    target = copy(client, [], accountId=bob.jmap_account)
    assert target["error"]["type"] == "accountNotFound"


def test_bad_arguments_are_invalid_arguments(client: Jmap) -> None:
    """blobIds that are not a list of ids, and a missing fromAccountId, are invalidArguments."""
    assert copy(client, "R1")["error"]["type"] == "invalidArguments"
    missing = client.call("Blob/copy", {"blobIds": []}, using=CORE_ONLY)
    assert missing["error"]["type"] == "invalidArguments"


def test_email_copy_is_refused_per_rfc(client: Jmap, bob: Person) -> None:
    """Email/copy: another account is (from)AccountNotFound; the one account is invalidArguments."""
    into_self = client.call(
        "Email/copy", {"fromAccountId": client.account, "create": {"k": {"id": "M1"}}}
    )
    assert into_self["error"]["type"] == "invalidArguments"
    from_other = client.call("Email/copy", {"fromAccountId": bob.jmap_account, "create": {}})
    assert from_other["error"]["type"] == "fromAccountNotFound"
    into_other = client.call(
        "Email/copy",
        {"fromAccountId": client.account, "accountId": bob.jmap_account, "create": {}},
    )
    assert into_other["error"]["type"] == "accountNotFound"
