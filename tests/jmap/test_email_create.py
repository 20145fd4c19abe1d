"""Email/set create and destroy over real HTTP (RFC 8621 §4.6), on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from mailroom.jmap import email_form
from mailroom.store.engine import Store
from mailroom.store.models import Account, Message
from tests.helpers import make_account
from tests.jmap.conftest import Jmap, Person, download, email_id, uploaded

BODY = ["bodyStructure", "textBody", "htmlBody", "attachments", "bodyValues"]


def _roles(client: Jmap) -> dict[str, str]:
    mailboxes = client.call("Mailbox/get", {"ids": None})["list"]
    return {m["role"]: m["id"] for m in mailboxes if m["role"]}


def _create(client: Jmap, email: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = client.call("Email/set", {"create": {"k1": email}})
    assert "error" not in result, result
    return result


def _created(client: Jmap, email: dict[str, Any]) -> dict[str, Any]:
    result = _create(client, email)
    assert result["notCreated"] is None, result["notCreated"]
    created: dict[str, Any] = result["created"]["k1"]
    return created


def _refused(client: Jmap, email: dict[str, Any]) -> dict[str, Any]:
    result = _create(client, email)
    assert result["created"] is None, result["created"]
    error: dict[str, Any] = result["notCreated"]["k1"]
    return error


def _get(client: Jmap, ident: str, properties: list[str] | None = None) -> dict[str, Any]:
    args: dict[str, Any] = {"ids": [ident], "fetchAllBodyValues": True}
    if properties is not None:
        args["properties"] = properties
    (found,) = client.call("Email/get", args)["list"]
    return dict(found)


def _raw_of(client: Jmap, created: dict[str, Any]) -> bytes:
    """The bytes of a created email, through the downloadUrl."""
    response = download(client, created["blobId"])
    assert response.status_code == 200, response.text
    return response.content


def _draft(drafts: str, **extra: Any) -> dict[str, Any]:
    return {
        "mailboxIds": {drafts: True},
        "keywords": {"$draft": True, "$seen": True},
        "from": [{"name": "Alice", "email": "alice@example.org"}],
        "to": [{"name": "Bob", "email": "bob@example.net"}],
        "subject": "Plans",
        "textBody": [{"partId": "t", "type": "text/plain"}],
        "bodyValues": {"t": {"value": "See you at noon.\nAlice"}},
        **extra,
    }


def test_a_plain_draft_is_a_stored_message_with_what_was_set(client: Jmap) -> None:
    """A draft comes back with id, blobId, threadId and size, and reads as it was written."""
    drafts = _roles(client)["drafts"]
    before = client.state("Email")
    created = _created(
        client,
        _draft(drafts, sentAt="2024-03-01T09:30:00+01:00", receivedAt="2024-03-02T10:00:00Z"),
    )
    assert set(created) == {"id", "blobId", "threadId", "size"}
    email = _get(client, created["id"])
    assert email["blobId"] == created["blobId"] and email["size"] == created["size"]
    assert email["threadId"] == created["threadId"]
    assert email["mailboxIds"] == {drafts: True}
    assert {"$draft", "$seen"} <= set(email["keywords"])
    assert email["subject"] == "Plans"
    assert email["from"] == [{"name": "Alice", "email": "alice@example.org"}]
    assert email["to"] == [{"name": "Bob", "email": "bob@example.net"}]
    assert email["sentAt"] in ("2024-03-01T09:30:00+01:00", "2024-03-01T08:30:00Z")
    assert email["receivedAt"] == "2024-03-02T10:00:00Z"
    (text,) = email["textBody"]
    assert email["bodyValues"][text["partId"]]["value"] == "See you at noon.\nAlice"
    raw = _raw_of(client, created)
    assert b"\r\nMessage-ID: <" in raw and b"@example.org>\r\n" in raw
    assert b"\r\nDate: Fri, 01 Mar 2024 09:30:00 +0100\r\n" in raw
    changes = client.call("Email/changes", {"sinceState": before})
    assert changes["created"] == [created["id"]]
    counts = client.call("Mailbox/get", {"ids": [drafts]})["list"][0]
    assert counts["totalEmails"] == 1


def test_generated_headers_encode_non_ascii_and_keep_every_form(client: Jmap) -> None:
    """Non-ASCII names and subjects are RFC 2047 words; header: forms write what they say."""
    drafts = _roles(client)["drafts"]
    created = _created(
        client,
        _draft(
            drafts,
            **{
                "from": [{"name": "Zoë Ämmä", "email": "alice@example.org"}],
                "subject": "Grüße aus Köln",
                "header:X-Note:asText": "naïve café",
                "header:List-Unsubscribe:asURLs": ["mailto:u@example.org"],
                "header:X-Tag:all": [" one", " two"],
                "header:Resent-To:asGroupedAddresses": [
                    {"name": "Team", "addresses": [{"name": None, "email": "t@example.org"}]}
                ],
            },
        ),
    )
    raw = _raw_of(client, created)
    assert raw.isascii()
    assert b"=?utf-8?" in raw
    assert b"\r\nX-Tag: one\r\nX-Tag: two\r\n" in raw
    assert b"\r\nResent-To: Team: t@example.org;\r\n" in raw
    email = _get(
        client,
        created["id"],
        ["from", "subject", "header:X-Note:asText", "header:List-Unsubscribe:asURLs"],
    )
    assert email["from"] == [{"name": "Zoë Ämmä", "email": "alice@example.org"}]
    assert email["subject"] == "Grüße aus Köln"
    assert email["header:X-Note:asText"] == "naïve café"
    assert email["header:List-Unsubscribe:asURLs"] == ["mailto:u@example.org"]


def test_alternative_with_an_uploaded_attachment_and_an_inline_image(client: Jmap) -> None:
    """Text + HTML become multipart/alternative, the cid image multipart/related, the PDF mixed."""
    drafts = _roles(client)["drafts"]
    pdf = uploaded(client, b"%PDF-1.4 draft attachment", "application/pdf")
    png = uploaded(client, b"\x89PNG\r\n\x1a\nimage", "image/png")
    created = _created(
        client,
        {
            "mailboxIds": {drafts: True},
            "keywords": {"$draft": True},
            "subject": "Report",
            "textBody": [{"partId": "t", "type": "text/plain"}],
            "htmlBody": [{"partId": "h", "type": "text/html"}],
            "bodyValues": {
                "t": {"value": "The chart is inline."},
                "h": {"value": '<p>The chart: <img src="cid:chart@x"></p>'},
            },
            "attachments": [
                {"blobId": pdf, "type": "application/pdf", "name": "résumé.pdf"},
                {"blobId": png, "type": "image/png", "cid": "chart@x", "disposition": "inline"},
            ],
        },
    )
    email = _get(client, created["id"], ["bodyStructure", "attachments", "hasAttachment"])
    root = email["bodyStructure"]
    assert root["type"] == "multipart/mixed"
    alternative, attachment = root["subParts"]
    assert alternative["type"] == "multipart/alternative"
    text, related = alternative["subParts"]
    assert text["type"] == "text/plain" and related["type"] == "multipart/related"
    assert [p["type"] for p in related["subParts"]] == ["text/html", "image/png"]
    assert related["subParts"][1]["cid"] == "chart@x"
    assert attachment["name"] == "résumé.pdf" and attachment["disposition"] == "attachment"
    assert email["hasAttachment"] is True
    url = client.session["downloadUrl"].format(
        accountId=client.account, blobId=attachment["blobId"], name="a.pdf", type="application/pdf"
    )
    assert client.http.get(url).content == b"%PDF-1.4 draft attachment"


def test_body_structure_with_part_and_raw_message_blobs(client: Jmap, alice: Person) -> None:
    """bodyStructure is written as given; A<id>-<part> and R<id> blobs are attachments too."""
    drafts = _roles(client)["drafts"]
    report = alice.messages["report"]
    structure = _get(client, email_id(report), ["attachments"])["attachments"]
    pdf_part = structure[0]["blobId"]
    created = _created(
        client,
        {
            "mailboxIds": {drafts: True},
            "subject": "Forwarding",
            "bodyStructure": {
                "type": "multipart/mixed",
                "subParts": [
                    {"partId": "1", "type": "text/plain", "header:X-Part:asText": "first"},
                    {"blobId": pdf_part, "type": "application/pdf", "name": "report.pdf"},
                    {"blobId": f"R{report}", "type": "message/rfc822"},
                ],
            },
            "bodyValues": {"1": {"value": "Two attachments."}},
        },
    )
    email = _get(client, created["id"], ["bodyStructure"])
    kinds = [p["type"] for p in email["bodyStructure"]["subParts"]]
    assert kinds == ["text/plain", "application/pdf", "message/rfc822"]
    raw = _raw_of(client, created)
    assert b"X-Part: first" in raw and b"Message-ID: <report@x>" in raw


def test_a_reply_joins_the_thread_of_its_parent(client: Jmap, alice: Person) -> None:
    """inReplyTo/references thread the draft with the message it answers."""
    drafts = _roles(client)["drafts"]
    parent = _get(client, email_id(alice.messages["hello"]), ["threadId", "messageId"])
    created = _created(
        client,
        _draft(
            drafts,
            subject="Re: Hello walrus",
            inReplyTo=parent["messageId"],
            references=parent["messageId"],
        ),
    )
    assert created["threadId"] == parent["threadId"]
    thread = client.call("Thread/get", {"ids": [parent["threadId"]]})["list"][0]
    assert created["id"] in thread["emailIds"]


def test_created_ids_can_be_referenced_and_destroyed(client: Jmap) -> None:
    """createdIds maps the creation id to the email; destroy answers destroyed and notFound."""
    drafts = _roles(client)["drafts"]
    response = client.post(
        {
            "using": ["urn:ietf:params:jmap:core", "urn:ietf:params:jmap:mail"],
            "methodCalls": [
                ["Email/set", {"accountId": client.account, "create": {"d": _draft(drafts)}}, "0"],
            ],
            "createdIds": {},
        }
    ).json()
    new = response["createdIds"]["d"]
    assert response["methodResponses"][0][1]["created"]["d"]["id"] == new
    before = client.state("Email")
    result = client.call("Email/set", {"destroy": [new, "M999999", "nonsense"]})
    assert result["destroyed"] == [new]
    assert set(result["notDestroyed"]) == {"M999999", "nonsense"}
    assert all(e["type"] == "notFound" for e in result["notDestroyed"].values())
    assert client.call("Email/get", {"ids": [new]})["notFound"] == [new]
    assert client.call("Email/changes", {"sinceState": before})["destroyed"] == [new]


REFUSALS: list[tuple[str, dict[str, Any], list[str]]] = [
    ("server-set id", {"id": "M1"}, ["id"]),
    ("unknown property", {"colour": "red"}, ["colour"]),
    ("headers", {"headers": [{"name": "X", "value": "y"}]}, ["headers"]),
    ("twice", {"header:From:asAddresses": [{"name": None, "email": "a@b.c"}]}, ["from"]),
    ("case-insensitive twice", {"header:subject:asText": "x"}, ["subject"]),
    ("forbidden form", {"header:Date:asAddresses": []}, ["header:Date:asAddresses"]),
    ("text on From", {"subject": None, "header:From:asText": "x"}, ["header:From:asText"]),
    ("content at top", {"header:Content-Type": " text/plain"}, ["header:Content-Type"]),
    (
        "cte on part",
        {"textBody": [{"partId": "t", "header:Content-Transfer-Encoding": " 8bit"}]},
        ["textBody"],
    ),
    ("structure and textBody", {"bodyStructure": {"partId": "t"}}, ["bodyStructure", "textBody"]),
    ("two text parts", {"textBody": [{"partId": "t"}, {"partId": "t"}]}, ["textBody"]),
    ("html text body", {"textBody": [{"partId": "t", "type": "text/html"}]}, ["textBody"]),
    ("charset with partId", {"textBody": [{"partId": "t", "charset": "utf-8"}]}, ["textBody"]),
    ("size with partId", {"textBody": [{"partId": "t", "size": 4}]}, ["textBody"]),
    ("partId and blobId", {"textBody": [{"partId": "t", "blobId": "R1"}]}, ["textBody"]),
    ("missing value", {"textBody": [{"partId": "nope"}]}, ["textBody"]),
    ("truncated value", {"bodyValues": {"t": {"value": "x", "isTruncated": True}}}, ["bodyValues"]),
    (
        "encoding problem",
        {"bodyValues": {"t": {"value": "x", "isEncodingProblem": True}}},
        ["bodyValues"],
    ),
    ("no mailbox", {"mailboxIds": {}}, ["mailboxIds"]),
    ("unknown mailbox", {"mailboxIds": {"L999999": True}}, ["mailboxIds"]),
    ("bad keyword", {"keywords": {"a b": True}}, ["keywords"]),
    ("bad address", {"to": [{"email": 5}]}, ["to"]),
    ("bad date", {"sentAt": "yesterday"}, ["sentAt"]),
    ("line break", {"subject": "a\r\nBcc: x@y"}, ["subject"]),
    (
        "field twice in a part",
        {"textBody": [{"partId": "t", "header:X-A": " 1", "header:x-a:asText": "2"}]},
        ["textBody"],
    ),
    (
        "root part repeats a top field",
        {"textBody": None, "bodyStructure": {"partId": "t", "header:Subject:asText": "x"}},
        ["subject", "bodyStructure"],
    ),
    ("part header form", {"textBody": [{"partId": "t", "header:Bad Name": "x"}]}, ["textBody"]),
    (
        "part content type header",
        {"textBody": [{"partId": "t", "header:Content-Type": " text/plain"}]},
        ["textBody"],
    ),
    ("bad part name", {"attachments": [{"partId": "t", "name": 5}]}, ["attachments"]),
    ("bad media type", {"textBody": [{"partId": "t", "type": "text"}]}, ["textBody"]),
    (
        "multipart without parts",
        {"textBody": None, "bodyStructure": {"type": "multipart/mixed"}},
        ["bodyStructure"],
    ),
]


@pytest.mark.parametrize(
    ("change", "expected"),
    [(change, expected) for _name, change, expected in REFUSALS],
    ids=[name for name, _change, _expected in REFUSALS],
)
def test_every_restriction_is_invalid_properties(
    client: Jmap, change: dict[str, Any], expected: list[str]
) -> None:
    """Each RFC 8621 §4.6 restriction refuses the creation with the properties at fault."""
    email = {**_draft(_roles(client)["drafts"]), **change}
    before = client.state("Email")
    error = _refused(client, email)
    assert error["type"] == "invalidProperties", error
    assert set(expected) <= set(error["properties"]), error
    assert client.state("Email") == before


def test_unknown_blobs_are_blob_not_found_with_every_id(client: Jmap) -> None:
    """blobNotFound names every blobId of the parts that does not exist (RFC 8621 §4.6)."""
    email = _draft(
        _roles(client)["drafts"],
        attachments=[{"blobId": "B" + "0" * 64}, {"blobId": "R999999"}, {"blobId": "R999999"}],
    )
    error = _refused(client, email)
    assert error["type"] == "blobNotFound"
    assert error["notFound"] == ["B" + "0" * 64, "R999999"]


def test_attachments_over_the_advertised_limit_are_too_large(
    client: Jmap, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session advertises maxSizeAttachmentsPerEmail and a bigger total is tooLarge."""
    capability = client.session["accounts"][client.account]["accountCapabilities"]
    limit = capability["urn:ietf:params:jmap:mail"]["maxSizeAttachmentsPerEmail"]
    assert limit == email_form.MAX_SIZE_ATTACHMENTS_PER_EMAIL > 0
    monkeypatch.setattr(email_form, "MAX_SIZE_ATTACHMENTS_PER_EMAIL", 10)
    blob = uploaded(client, b"x" * 11, "application/octet-stream")
    error = _refused(client, _draft(_roles(client)["drafts"], attachments=[{"blobId": blob}]))
    assert error["type"] == "tooLarge"


def test_one_bad_creation_leaves_the_others(client: Jmap) -> None:
    """Creations are independent: a refused one does not undo a good one in the same call."""
    drafts = _roles(client)["drafts"]
    result = client.call(
        "Email/set",
        {"create": {"good": _draft(drafts), "bad": _draft(drafts, mailboxIds={})}},
    )
    assert set(result["created"]) == {"good"} and set(result["notCreated"]) == {"bad"}
    assert client.call("Email/get", {"ids": [result["created"]["good"]["id"]]})["list"]


def test_a_mailbox_created_in_the_same_request_can_hold_the_email(client: Jmap) -> None:
    """mailboxIds may name a mailbox by its creation id (#mb) from an earlier call."""
    (mailbox_set, email_set) = client.calls(
        ["Mailbox/set", {"accountId": client.account, "create": {"mb": {"name": "Plans"}}}, "0"],
        [
            "Email/set",
            {"accountId": client.account, "create": {"k": _draft("#mb")}},
            "1",
        ],
    )
    mailbox = mailbox_set[1]["created"]["mb"]["id"]
    created = email_set[1]["created"]["k"]
    assert _get(client, created["id"], ["mailboxIds"])["mailboxIds"] == {mailbox: True}


def test_the_same_message_id_and_size_twice_is_already_exists(client: Jmap) -> None:
    """A second email with the Message-ID and size of a stored one is alreadyExists."""
    email = _draft(_roles(client)["drafts"], messageId=["fixed-id@example.org"])
    first = _created(client, email)
    error = _refused(client, email)
    assert error["type"] == "alreadyExists" and error["existingId"] == first["id"]


def test_a_text_attachment_from_a_body_value_and_a_typed_upload(client: Jmap) -> None:
    """An attachment may be a body value (text/plain by default) or an upload of its own type."""
    notes = uploaded(client, b"a,b\n1,2\n", "text/csv; charset=utf-8")
    created = _created(
        client,
        _draft(
            _roles(client)["drafts"],
            bodyValues={"t": {"value": "See attached."}, "n": {"value": "Notes."}},
            attachments=[{"partId": "n", "name": "notes.txt"}, {"blobId": notes}],
        ),
    )
    attachments = _get(client, created["id"], ["attachments"])["attachments"]
    assert [(a["type"], a["name"]) for a in attachments] == [
        ("text/plain", "notes.txt"),
        ("text/csv", None),
    ]


def test_the_owner_is_the_account_of_the_from_address(
    client: Jmap, alice: Person, store: Store
) -> None:
    """A draft from an account's address belongs to that account, its Message-ID on its domain."""
    _user, work_id, _inbox = make_account(store, owner="alice", name="work")
    with store.session() as session:
        account = session.get(Account, work_id)
        assert account is not None
        account.settings = {"email": "Alice@Work.example"}
    created = _created(
        client,
        _draft(
            _roles(client)["drafts"], **{"from": [{"name": None, "email": "alice@work.example"}]}
        ),
    )
    with store.session() as session:
        row = session.execute(
            select(Message.account_id, Message.message_id_header).where(
                Message.id == int(created["id"][1:])
            )
        ).one()
    assert row.account_id == work_id and row.message_id_header.endswith("@work.example")
    other = _created(client, _draft(_roles(client)["drafts"]))
    with store.session() as session:
        owner = session.scalar(select(Message.account_id).where(Message.id == int(other["id"][1:])))
    assert owner == alice.account_id
