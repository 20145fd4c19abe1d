"""Three JMAP client libraries from the registries live a mail client's day on mailroom.

jmaplib and jmapc (PyPI) and jmap-jam (npm, run by Node) each: create a
mailbox, upload a message and import it there with keywords and a
receivedAt, query it back with a filter and a sort (results referenced into
Email/get), write a draft, move the message to the Inbox, destroy the draft
and the mailbox. One check holds all three to the same outcome, on both
stores. jmapc also sends a draft (EmailSubmission) to a real SMTP sink.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from mailroom.jmap.submitting import KIND
from mailroom.outbound.lanes import lane_for
from mailroom.outbound.sender import Sender
from mailroom.store.engine import Store
from tests.factories import make_message
from tests.jmap.conftest import PASSWORD, Person, Server
from tests.jmap.email_submission_helpers import give_outgoing, sending_settings
from tests.support.smtp_sink import SmtpSink

JS_DIR = Path(__file__).resolve().parents[1] / "js"
IN_CI = os.environ.get("CI", "").lower() == "true"

MESSAGE = make_message(
    "fish@x",
    subject="Fish supply",
    sender="Wally Walrus <walrus@example.net>",
    to="Alice <alice@example.org>",
    body="The herring arrive on Tuesday.\n",
)
RECEIVED = "2024-05-01T10:00:00Z"
DRAFT_TEXT = "More fish, please."


def check(seen: dict[str, Any]) -> None:
    """What every client must have observed."""
    ids = seen["ids"]
    assert seen["uploadSize"] == len(MESSAGE)
    assert seen["foundIds"] == [ids["emailId"]] and seen["foundTotal"] == 1
    imported = seen["imported"]
    assert imported["subject"] == "Fish supply"
    assert imported["keywords"] == {"$seen": True, "$forwarded": True}
    assert imported["mailboxIds"] == {ids["projects"]: True}
    assert _instant(imported["receivedAt"]) == _instant(RECEIVED)
    draft = seen["draft"]
    assert draft["subject"] == "Re: Fish supply"
    assert draft["keywords"] == {"$draft": True, "$seen": True}
    assert draft["mailboxIds"] == {ids["drafts"]: True}
    assert seen["movedUpdated"] == [ids["emailId"]]
    assert seen["mailboxIdsAfterMove"] == {ids["inbox"]: True}  # exactly as set, nothing added
    assert seen["destroyed"] == {"emails": [ids["draftId"]], "mailboxes": [ids["projects"]]}
    assert seen["draftNotFound"] == [ids["draftId"]]


def draft(from_email: str, drafts: str) -> dict[str, Any]:
    """The Email/set create of the scenario's draft."""
    return {
        "mailboxIds": {drafts: True},
        "keywords": {"$draft": True, "$seen": True},
        "from": [{"name": "Alice", "email": from_email}],
        "to": [{"name": "Walrus", "email": "walrus@example.net"}],
        "subject": "Re: Fish supply",
        "textBody": [{"partId": "t", "type": "text/plain"}],
        "bodyValues": {"t": {"value": DRAFT_TEXT}},
    }


def query_filter(projects: str) -> dict[str, Any]:
    return {"operator": "AND", "conditions": [{"inMailbox": projects}, {"from": "walrus"}]}


SORT = [{"property": "subject", "isAscending": True}]
SHOWN = ["subject", "keywords", "mailboxIds", "receivedAt"]


def test_jmap_jam_from_npm(server: Server, alice: Person, tmp_path: Path) -> None:
    """jmap-jam: convenience methods, requestMany with a result reference, uploadBlob."""
    node = shutil.which("node")
    if node is None or not (JS_DIR / "node_modules" / "jmap-jam").is_dir():
        message = "Node.js and tests/js/node_modules are needed (`make test` installs them)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    message_file = tmp_path / "fish.eml"
    message_file.write_bytes(MESSAGE)
    done = subprocess.run(
        [node, "scenario.mjs", f"{server.base}/.well-known/jmap", alice.token, str(message_file)],
        cwd=JS_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    check(json.loads(done.stdout))


def test_jmaplib(server: Server, alice: Person) -> None:
    """jmaplib: typed batches for Mailbox/set, Email/import, Email/set, references."""
    from jmap.auth import BasicAuth
    from jmap.client import JMAPClient

    seen: dict[str, Any] = {}
    url = f"{server.base}/.well-known/jmap"
    with JMAPClient.connect(url, auth=BasicAuth("alice", PASSWORD)) as client:
        boxes = client.call("Mailbox/get", {"ids": None}).items
        role = {box.role: box.id for box in boxes if box.role}
        with client.batch() as batch:
            made = batch.mail.mailbox.set(
                create={"projects": {"name": "Projects", "parentId": None, "sortOrder": 5}}
            )
        projects = _created_id(made.result, "projects")
        upload = client.upload(MESSAGE, content_type="message/rfc822")
        seen["uploadSize"] = upload.size
        with client.batch() as batch:
            imported = batch.mail.email.import_(
                emails={
                    "one": {
                        "blobId": upload.blob_id,
                        "mailboxIds": {projects: True},
                        "keywords": {"$seen": True, "$forwarded": True},
                        "receivedAt": RECEIVED,
                    }
                }
            )
        email = _created_id(imported.result, "one")
        with client.batch() as batch:
            found = batch.mail.email.query(
                filter=query_filter(projects), sort=SORT, calculate_total=True
            )
            got = batch.mail.email.get(ids=found.ref_ids(), properties=SHOWN)
        seen["foundIds"], seen["foundTotal"] = list(found.result.ids), found.result.total
        seen["imported"] = _wire(got.result.items[0], SHOWN)
        identity = _wire(client.call("Identity/get", {"ids": None}).items[0], ["email"])["email"]
        with client.batch() as batch:
            drafted = batch.mail.email.set(create={"draft": draft(identity, role["drafts"])})
        draft_id = _created_id(drafted.result, "draft")
        seen["draft"] = _wire(
            client.call(
                "Email/get",
                {"ids": [draft_id], "properties": ["subject", "keywords", "mailboxIds"]},
            ).items[0],
            ["subject", "keywords", "mailboxIds"],
        )
        with client.batch() as batch:
            moved = batch.mail.email.set(update={email: {"mailboxIds": {role["inbox"]: True}}})
        seen["movedUpdated"] = list(moved.result.updated or {})
        seen["mailboxIdsAfterMove"] = _wire(
            client.call("Email/get", {"ids": [email], "properties": ["mailboxIds"]}).items[0],
            ["mailboxIds"],
        )["mailboxIds"]
        with client.batch() as batch:
            gone = batch.mail.email.set(destroy=[draft_id])
            box_gone = batch.mail.mailbox.set(destroy=[projects])
        seen["destroyed"] = {
            "emails": list(gone.result.destroyed or []),
            "mailboxes": list(box_gone.result.destroyed or []),
        }
        seen["draftNotFound"] = list(client.call("Email/get", {"ids": [draft_id]}).not_found)
    seen["ids"] = {
        "projects": projects,
        "emailId": email,
        "draftId": draft_id,
        "inbox": role["inbox"],
        "drafts": role["drafts"],
    }
    check(seen)


def test_jmapc_over_https(
    tls_server: Server, alice: Person, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """jmapc: MailboxSet and EmailSet with its models, upload_blob, Email/import as a custom
    method, EmailQuery + EmailGet by reference."""
    from jmapc import (
        Comparator,
        EmailQueryFilterCondition,
        EmailQueryFilterOperator,
        Operator,
        Ref,
    )
    from jmapc.methods import (
        CustomMethod,
        EmailGet,
        EmailQuery,
        EmailSet,
        IdentityGet,
        MailboxSet,
    )
    from jmapc.models import Mailbox

    client, role = _jmapc_client(tls_server, monkeypatch)
    made = client.request(MailboxSet(create={"projects": Mailbox(name="Projects", sort_order=5)}))
    projects = made.created["projects"].id
    message_file = tmp_path / "fish.eml"
    message_file.write_bytes(MESSAGE)
    blob = client.upload_blob(message_file)
    seen: dict[str, Any] = {"uploadSize": blob.size}

    importing = CustomMethod(
        data={
            "accountId": client.account_id,
            "emails": {
                "one": {
                    "blobId": blob.id,
                    "mailboxIds": {projects: True},
                    "keywords": {"$seen": True, "$forwarded": True},
                    "receivedAt": RECEIVED,
                }
            },
        }
    )
    importing.jmap_method = "Email/import"
    importing.using = {"urn:ietf:params:jmap:mail"}
    email = client.request(importing).data["created"]["one"]["id"]

    found, got = client.request(
        [
            EmailQuery(
                filter=EmailQueryFilterOperator(
                    operator=Operator.AND,
                    conditions=[
                        EmailQueryFilterCondition(in_mailbox=projects),
                        EmailQueryFilterCondition(mail_from="walrus"),
                    ],
                ),
                sort=[Comparator(property="subject", is_ascending=True)],
                calculate_total=True,
            ),
            EmailGet(ids=Ref("/ids"), properties=SHOWN),
        ]
    )
    seen["foundIds"], seen["foundTotal"] = found.response.ids, found.response.total
    item = got.response.data[0]
    seen["imported"] = {
        "subject": item.subject,
        "keywords": item.keywords,
        "mailboxIds": item.mailbox_ids,
        "receivedAt": item.received_at.isoformat(),
    }
    identity = client.request(IdentityGet(ids=None)).data[0].email
    drafted = client.request(EmailSet(create={"draft": _jmapc_draft(identity, role["drafts"])}))
    draft_id = drafted.created["draft"].id
    shown = client.request(
        EmailGet(ids=[draft_id], properties=["subject", "keywords", "mailboxIds"])
    ).data[0]
    seen["draft"] = {
        "subject": shown.subject,
        "keywords": shown.keywords,
        "mailboxIds": shown.mailbox_ids,
    }
    moved = client.request(EmailSet(update={email: {"mailboxIds": {role["inbox"]: True}}}))
    seen["movedUpdated"] = list(moved.updated or {})
    after = client.request(EmailGet(ids=[email], properties=["mailboxIds"])).data[0]
    seen["mailboxIdsAfterMove"] = after.mailbox_ids
    gone = client.request(EmailSet(destroy=[draft_id]))
    box_gone = client.request(MailboxSet(destroy=[projects]))
    seen["destroyed"] = {"emails": gone.destroyed, "mailboxes": box_gone.destroyed}
    seen["draftNotFound"] = client.request(EmailGet(ids=[draft_id])).not_found
    seen["ids"] = {
        "projects": projects,
        "emailId": email,
        "draftId": draft_id,
        "inbox": role["inbox"],
        "drafts": role["drafts"],
    }
    check(seen)


def test_jmapc_sends_a_draft(
    tls_server: Server,
    store: Store,
    alice: Person,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """jmapc: EmailSubmissionSet with on_success_update_email moves the draft to Sent (the
    implicit Email/set comes back as a second response), the lane delivers it to a real sink,
    EmailSubmissionGet shows it final with the sink's reply."""
    from jmapc.methods import (
        EmailGet,
        EmailSet,
        EmailSetResponse,
        EmailSubmissionGet,
        EmailSubmissionSet,
        EmailSubmissionSetResponse,
        IdentityGet,
    )
    from jmapc.models import EmailSubmission, UndoStatus

    with SmtpSink() as sink:
        give_outgoing(store, alice, sink)
        client, role = _jmapc_client(tls_server, monkeypatch)
        identity = client.request(IdentityGet(ids=None)).data[0]
        drafted = client.request(
            EmailSet(create={"draft": _jmapc_draft(identity.email, role["drafts"])})
        )
        draft_id = drafted.created["draft"].id
        submitted, moved = client.request(
            EmailSubmissionSet(
                create={"send": EmailSubmission(identity_id=identity.id, email_id=draft_id)},
                on_success_update_email={
                    "#send": {
                        f"mailboxIds/{role['drafts']}": None,
                        f"mailboxIds/{role['sent']}": True,
                        "keywords/$draft": None,
                    }
                },
            )
        )
        assert isinstance(submitted, EmailSubmissionSetResponse)
        assert isinstance(moved, EmailSetResponse) and moved.updated == {draft_id: None}
        created = submitted.created["send"]
        assert created is not None and created.undo_status == UndoStatus.PENDING
        settings = sending_settings(tmp_path)
        lane = lane_for(KIND, settings.lane_kind_map)
        assert Sender(store, settings).run_lane(lane) == 1
        (delivered,) = sink.messages
        assert delivered.rcpt_tos == ("walrus@example.net",)
        (sent,) = client.request(EmailSubmissionGet(ids=[created.id])).data
        assert sent.undo_status == UndoStatus.FINAL and sent.email_id == draft_id
        assert sent.delivery_status is not None
        assert sent.delivery_status["walrus@example.net"].smtp_reply.startswith("250")
        (email,) = client.request(EmailGet(ids=[draft_id], properties=["mailboxIds"])).data
        assert email.mailbox_ids == {role["sent"]: True}


def _jmapc_client(server: Server, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict[str, str]]:
    """A jmapc client of Alice's over https, and her mailbox ids by role."""
    from jmapc import Client
    from jmapc.methods import MailboxGet

    assert isinstance(server.verify, str)
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", server.verify)
    client = Client.create_with_password(server.base.removeprefix("https://"), "alice", PASSWORD)
    role = {box.role: box.id for box in client.request(MailboxGet(ids=None)).data if box.role}
    return client, role


def _jmapc_draft(from_email: str, drafts: str) -> Any:
    """The scenario's draft as a jmapc Email model."""
    from jmapc.models import Email, EmailAddress, EmailBodyPart, EmailBodyValue

    return Email(
        mailbox_ids={drafts: True},
        keywords={"$draft": True, "$seen": True},
        mail_from=[EmailAddress(name="Alice", email=from_email)],
        to=[EmailAddress(name="Walrus", email="walrus@example.net")],
        subject="Re: Fish supply",
        text_body=[EmailBodyPart(part_id="t", type="text/plain")],
        body_values={"t": EmailBodyValue(value=DRAFT_TEXT)},
    )


def _created_id(result: Any, key: str) -> str:
    return str(result.created[key].id)


def _wire(item: Any, properties: list[str]) -> dict[str, Any]:
    """A typed jmaplib object back as the JSON properties the test compares."""
    wire = item.model_dump(mode="json", by_alias=True)
    return {name: wire[name] for name in properties}


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
