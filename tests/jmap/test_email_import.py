"""Email/import (RFC 8621 §4.8) over real HTTP: upload, import, threading, exactly once, errors."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from sqlalchemy import func, select

from mailroom.config import Settings
from mailroom.ingest import steps
from mailroom.ingest.model import BatchResult
from mailroom.jmap.app import JmapConfig
from mailroom.jmap.dispatcher import Limits
from mailroom.labels.propagation import propagate_pending
from mailroom.providers import registry
from mailroom.store.engine import Store
from mailroom.store.models import Message
from tests.factories import make_message
from tests.imap.conftest import add_account, dovecot, new_mailbox, settings
from tests.imap.views import sync_all
from tests.jmap.conftest import Jmap, Person, Server, email_id, run_server, uploaded
from tests.support.dovecot import DovecotServer

__all__ = ["dovecot", "settings"]  # the IMAP fixtures, used by the Dovecot test


def inbox(client: Jmap) -> str:
    """The id of the mailbox with role inbox."""
    mailboxes = client.call("Mailbox/get", {"ids": None, "properties": ["role"]})["list"]
    found: str = next(m["id"] for m in mailboxes if m["role"] == "inbox")
    return found


def import_blob(client: Jmap, blob_id: object, **extra: Any) -> Any:
    """Email/import of one blob (creation id ``k``) into the inbox unless ``mailboxIds`` given."""
    spec = {"blobId": blob_id, "mailboxIds": {inbox(client): True}, **extra}
    return client.call("Email/import", {"emails": {"k": spec}})


def test_import_then_get_and_query_show_it(client: Jmap) -> None:
    """An imported upload is an Email with its mailboxes, keywords, receivedAt; query finds it."""
    raw = make_message("imported@x", subject="Imported walrus", body="Tusks.\n")
    result = import_blob(
        client,
        uploaded(client, raw),
        keywords={"$seen": True, "$Flagged": True},
        receivedAt="2024-05-06T07:08:09Z",
    )
    created = result["created"]["k"]
    assert set(created) == {"id", "blobId", "threadId", "size"}
    assert created["size"] == len(raw)
    assert result["newState"] != result["oldState"]
    (email,) = client.call(
        "Email/get",
        {"ids": [created["id"]], "properties": ["subject", "keywords", "mailboxIds", "receivedAt"]},
    )["list"]
    assert email["subject"] == "Imported walrus"
    assert email["receivedAt"] == "2024-05-06T07:08:09Z"
    assert {"$seen", "$flagged"} <= set(email["keywords"])
    assert inbox(client) in email["mailboxIds"]
    found = client.call(
        "Email/query", {"filter": {"inMailbox": inbox(client), "subject": "Imported walrus"}}
    )
    assert found["ids"] == [created["id"]]
    download = client.http.get(
        client.session["downloadUrl"]
        .replace("{accountId}", client.account)
        .replace("{blobId}", created["blobId"])
        .replace("{name}", "m.eml")
        .replace("{type}", "message/rfc822")
    )
    assert download.content == raw


def test_import_is_threaded_with_what_it_replies_to(client: Jmap, alice: Person) -> None:
    """An imported reply joins the thread of the message it answers (In-Reply-To)."""
    raw = make_message(
        "imported-reply@x",
        subject="Re: Hello walrus",
        in_reply_to="hello@x",
        references=["hello@x"],
        minutes=30,
    )
    created = import_blob(client, uploaded(client, raw))["created"]["k"]
    (hello,) = client.call(
        "Email/get", {"ids": [email_id(alice.messages["hello"])], "properties": ["threadId"]}
    )["list"]
    assert created["threadId"] == hello["threadId"]
    (thread,) = client.call("Thread/get", {"ids": [hello["threadId"]]})["list"]
    assert created["id"] in thread["emailIds"]


def test_import_reaches_email_changes(client: Jmap) -> None:
    """The imported Email is in the created list of Email/changes since the state before."""
    before = client.state("Email")
    created = import_blob(client, uploaded(client, make_message("changes@x")))["created"]["k"]
    changes = client.call("Email/changes", {"sinceState": before})
    assert created["id"] in changes["created"]


def test_same_blob_twice_is_one_email(client: Jmap) -> None:
    """A second import of the same bytes is alreadyExists with existingId, and stores nothing."""
    blob_id = uploaded(client, make_message("twice@x", subject="Twice"))
    first = import_blob(client, blob_id, keywords={"$seen": True})["created"]["k"]
    state = client.state("Email")
    second = import_blob(client, blob_id, keywords={"custom": True})
    error = second["notCreated"]["k"]
    assert error["type"] == "alreadyExists"
    assert error["existingId"] == first["id"]
    assert client.state("Email") == state
    found = client.call("Email/query", {"filter": {"subject": "Twice"}})
    assert found["ids"] == [first["id"]]


def test_same_blob_twice_in_one_call(client: Jmap) -> None:
    """Two creation ids with the same blob in one call: one created, the other alreadyExists."""
    blob_id = uploaded(client, make_message("one-call@x"))
    spec = {"blobId": blob_id, "mailboxIds": {inbox(client): True}}
    result = client.call("Email/import", {"emails": {"a": spec, "b": spec}})
    assert list(result["created"]) == ["a"]
    assert result["notCreated"]["b"]["existingId"] == result["created"]["a"]["id"]


def test_concurrent_imports_of_one_blob_store_one_email(client: Jmap) -> None:
    """Eight concurrent imports of one blob create exactly one Email; the rest alreadyExists."""
    blob_id = uploaded(client, make_message("concurrent@x", subject="Concurrent walrus"))
    mailbox = inbox(client)

    def attempt(_: int) -> Any:
        return client.call(
            "Email/import", {"emails": {"k": {"blobId": blob_id, "mailboxIds": {mailbox: True}}}}
        )

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(attempt, range(8)))
    created = [r["created"]["k"]["id"] for r in results if r.get("created")]
    refused = [r["notCreated"]["k"] for r in results if r.get("notCreated")]
    assert len(created) == 1
    assert len(refused) == 7
    assert all(e["type"] == "alreadyExists" and e["existingId"] == created[0] for e in refused)
    found = client.call("Email/query", {"filter": {"subject": "Concurrent walrus"}})
    assert found["ids"] == created


def test_import_of_a_raw_message_blob(client: Jmap, alice: Person) -> None:
    """Any readable blob can be imported: the raw bytes of a stored message make a new Email."""
    raw_blob = f"R{alice.messages['other']}"
    created = import_blob(client, raw_blob)["created"]["k"]
    assert created["id"] != email_id(alice.messages["other"])
    again = import_blob(client, raw_blob)["notCreated"]["k"]
    assert again["existingId"] == created["id"]


def test_another_users_blob_is_invalid_properties(
    server: Server, alice: Person, bob: Person
) -> None:
    """Importing a blob of another user fails as a missing blob (invalidProperties blobId)."""
    with Jmap(server, alice) as mine, Jmap(server, bob) as theirs:
        blob_id = uploaded(mine, make_message("private@x"))
        for foreign in (blob_id, f"R{alice.messages['hello']}", "Bnothing", 7):
            error = import_blob(theirs, foreign)["notCreated"]["k"]
            assert error["type"] == "invalidProperties"
            assert error["properties"] == ["blobId"]


def test_bad_mailbox_ids_are_invalid_properties(server: Server, alice: Person, bob: Person) -> None:
    """Empty, unknown, malformed or another user's mailboxIds are invalidProperties mailboxIds."""
    with Jmap(server, alice) as mine, Jmap(server, bob) as theirs:
        blob_id = uploaded(mine, make_message("nowhere@x"))
        cases: list[object] = [{}, {"L999999": True}, {"x": True}, {inbox(theirs): True}, []]
        for mailboxes in cases:
            error = import_blob(mine, blob_id, mailboxIds=mailboxes)["notCreated"]["k"]
            assert error["type"] == "invalidProperties", mailboxes
            assert error["properties"] == ["mailboxIds"]


def test_bad_keywords_received_at_and_properties(client: Jmap) -> None:
    """Invalid keywords, receivedAt and unknown properties are invalidProperties naming them."""
    blob_id = uploaded(client, make_message("bad-props@x"))
    cases: list[tuple[dict[str, Any], str]] = [
        ({"keywords": {"bad(keyword": True}}, "keywords"),
        ({"keywords": {"$seen": False}}, "keywords"),
        ({"receivedAt": "yesterday"}, "receivedAt"),
        ({"subject": "no"}, "subject"),
    ]
    for extra, name in cases:
        error = import_blob(client, blob_id, **extra)["notCreated"]["k"]
        assert error["type"] == "invalidProperties", extra
        assert error["properties"] == [name]


def test_not_a_message_is_invalid_email(client: Jmap) -> None:
    """A blob without any header field cannot be imported: invalidEmail."""
    blob_id = uploaded(client, b"just some words, no header at all\r\n")
    error = import_blob(client, blob_id)["notCreated"]["k"]
    assert error["type"] == "invalidEmail"


def test_if_in_state_mismatch(client: Jmap) -> None:
    """ifInState other than the Email state is stateMismatch; the current one imports."""
    blob_id = uploaded(client, make_message("state@x"))
    spec = {"blobId": blob_id, "mailboxIds": {inbox(client): True}}
    wrong = client.call("Email/import", {"ifInState": "0", "emails": {"k": spec}})
    assert wrong["error"]["type"] == "stateMismatch"
    state = client.state("Email")
    right = client.call("Email/import", {"ifInState": state, "emails": {"k": spec}})
    assert right["oldState"] == state
    assert "k" in right["created"]


def test_created_ids_name_the_imported_email(client: Jmap) -> None:
    """A request with createdIds gets the creation id mapped to the imported Email's id."""
    blob_id = uploaded(client, make_message("ref@x"))
    spec = {"blobId": blob_id, "mailboxIds": {inbox(client): True}}
    response = client.post(
        {
            "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
            "methodCalls": [
                ["Email/import", {"accountId": client.account, "emails": {"k": spec}}, "0"]
            ],
            "createdIds": {},
        }
    ).json()
    created = response["methodResponses"][0][1]["created"]["k"]["id"]
    assert response["createdIds"] == {"k": created}


def test_arguments_are_checked(client: Jmap) -> None:
    """A missing emails map, another account and unknown arguments are method errors."""
    assert client.call("Email/import", {})["error"]["type"] == "invalidArguments"
    other = client.calls(["Email/import", {"accountId": "u999", "emails": {}}, "c"])
    assert other[0][1]["type"] == "accountNotFound"
    extra = client.call("Email/import", {"emails": {}, "bogus": 1})
    assert extra["error"]["type"] == "invalidArguments"


def test_import_into_an_imap_folder_is_appended_once(
    client: Jmap, store: Store, alice: Person, settings: Settings, dovecot: DovecotServer
) -> None:
    """Imported into a mailbox of an IMAP account, the email is APPENDed there and synced once."""
    imap = new_mailbox(dovecot)
    account = add_account(store, settings, imap, owner=alice.name)
    sync_all(store, account, settings)
    raw = make_message("appended@x", subject="Appended walrus")
    blob_id = uploaded(client, raw)
    created = import_blob(client, blob_id, keywords={"$seen": True})["created"]["k"]
    propagator = registry.propagator_for(store, "imap", settings)
    assert propagator is not None
    run = propagate_pending(store, account, propagator)
    assert run.failed == 0 and run.retried == 0
    with imap.client() as other:
        other.select_folder("INBOX")
        uids = other.search(["HEADER", "Message-ID", "<appended@x>"])
        assert len(uids) == 1
        assert b"\\Seen" in other.get_flags(uids)[uids[0]]
    sync_all(store, account, settings)
    found = client.call("Email/query", {"filter": {"subject": "Appended walrus"}})
    assert found["ids"] == [created["id"]]
    again = import_blob(client, blob_id)["notCreated"]["k"]
    assert (again["type"], again["existingId"]) == ("alreadyExists", created["id"])


def test_ingest_steps_run_after_the_import_commits(
    client: Jmap, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ingest steps see the imported message, committed, once (as after any batch)."""
    seen: list[tuple[list[int], int]] = []

    class Recorder:
        name = "recorder"

        def run(self, result: BatchResult) -> None:
            with store.session() as session:  # a fresh session: only committed rows
                stored = session.scalar(
                    select(func.count())
                    .select_from(Message)
                    .where(Message.id.in_(result.created_ids))
                )
            seen.append((list(result.created_ids), int(stored or 0)))

    monkeypatch.setattr(steps, "STEPS", [Recorder()])
    created = import_blob(client, uploaded(client, make_message("stepped@x")))["created"]["k"]
    assert seen == [([int(created["id"][1:])], 1)]
    import_blob(client, uploaded(client, make_message("stepped@x")))  # alreadyExists
    assert len(seen) == 1


def test_a_message_over_max_size_upload_is_too_large(store: Store, alice: Person) -> None:
    """A blob larger than maxSizeUpload (here a stored message's raw bytes) is tooLarge."""
    config = JmapConfig(poll_interval=0.05, limits=Limits(max_size_upload=200))
    for server in run_server(store, jmap=config):
        with Jmap(server, alice) as client:
            error = import_blob(client, f"R{alice.messages['report']}")["notCreated"]["k"]
            assert error["type"] == "tooLarge"
            assert error["properties"] == ["blobId"]
