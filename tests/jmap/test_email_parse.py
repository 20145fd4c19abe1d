"""Email/parse (RFC 8621 §4.9) over real HTTP: blobs read as Emails, parts downloadable."""

from __future__ import annotations

from typing import Any

from tests.jmap.conftest import PASSWORD, Jmap, Person, Server, download, upload, with_attachment


def parse(client: Jmap, blob_ids: object, **args: Any) -> Any:
    """Email/parse of these blobs."""
    return client.call("Email/parse", {"blobIds": blob_ids, **args})


def test_an_uploaded_message_parses_with_downloadable_parts(client: Jmap) -> None:
    """An upload parses into the default properties; its attachment's blobId downloads."""
    raw = with_attachment()
    blob_id = upload(client, raw, "message/rfc822").json()["blobId"]
    result = parse(client, [blob_id], fetchTextBodyValues=True)
    email = result["parsed"][blob_id]
    assert "id" not in email
    assert email["subject"] == "Quarterly report"
    assert email["from"] == [{"name": "Carol Reports", "email": "carol@reports.example"}]
    assert email["messageId"] == ["report@x"]
    assert email["sentAt"] == "2024-03-01T12:00:00Z"
    assert email["hasAttachment"] is True
    assert email["preview"].startswith("The numbers are attached.")
    (text,) = email["textBody"]
    assert email["bodyValues"][text["partId"]]["value"] == "The numbers are attached.\n"
    (pdf,) = email["attachments"]
    assert pdf["name"] == "report.pdf"
    assert download(client, pdf["blobId"]).content == b"%PDF-1.4 fake"
    assert result["notFound"] is None and result["notParsable"] is None


def test_stored_only_properties_are_null(client: Jmap, alice: Person) -> None:
    """id, threadId, mailboxIds, keywords, receivedAt are null; blobId and size the blob's."""
    blob_id = f"R{alice.messages['hello']}"
    properties = ["id", "blobId", "threadId", "mailboxIds", "keywords", "receivedAt", "size"]
    email = parse(client, [blob_id], properties=properties)["parsed"][blob_id]
    assert email == {
        "id": None,
        "blobId": blob_id,
        "threadId": None,
        "mailboxIds": None,
        "keywords": None,
        "receivedAt": None,
        "size": email["size"],
    }
    assert email["size"] > 0


def test_a_raw_message_blob_parses_like_email_get(client: Jmap, alice: Person) -> None:
    """The raw blob of a stored message parses to what Email/get says of it."""
    message = f"M{alice.messages['report']}"
    names = ["subject", "from", "to", "cc", "sentAt", "messageId", "attachments", "textBody"]
    (got,) = client.call("Email/get", {"ids": [message], "properties": names})["list"]
    blob_id = f"R{alice.messages['report']}"
    parsed = parse(client, [blob_id], properties=names)["parsed"][blob_id]
    assert parsed == {name: got[name] for name in names}


def test_not_found_and_not_parsable(server: Server, alice: Person, bob: Person) -> None:
    """Unknown or another user's blobs are notFound; bytes without a header are notParsable."""
    with Jmap(server, alice) as mine, Jmap(server, bob) as theirs:
        secret = upload(mine, with_attachment()).json()["blobId"]
        words = upload(theirs, b"no header here at all\r\n").json()["blobId"]
        result = parse(theirs, [secret, "Rnope", words, f"R{alice.messages['hello']}"])
        assert result["parsed"] is None
        assert sorted(result["notFound"]) == sorted(
            [secret, "Rnope", f"R{alice.messages['hello']}"]
        )
        assert result["notParsable"] == [words]


def test_an_attached_message_parses_and_its_parts_download(client: Jmap) -> None:
    """A message/rfc822 attachment parses; its parts get blob ids that download."""
    inner = with_attachment()
    outer = (
        b"From: a@example.org\r\nTo: b@example.org\r\nSubject: Fwd\r\n"
        b"Message-ID: <outer@x>\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: multipart/mixed; boundary="b"\r\n\r\n'
        b"--b\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n"
        b"--b\r\nContent-Type: message/rfc822\r\n\r\n" + inner + b"\r\n--b--\r\n"
    )
    blob_id = upload(client, outer, "message/rfc822").json()["blobId"]
    outer_email = parse(client, [blob_id], properties=["attachments"])["parsed"][blob_id]
    (attached,) = outer_email["attachments"]
    assert attached["type"] == "message/rfc822"
    inner_email = parse(client, [attached["blobId"]])["parsed"][attached["blobId"]]
    assert inner_email["subject"] == "Quarterly report"
    (pdf,) = inner_email["attachments"]
    assert download(client, pdf["blobId"]).content == b"%PDF-1.4 fake"


def test_arguments_are_checked(client: Jmap) -> None:
    """blobIds must be a list; unknown properties and header forms are invalidArguments."""
    assert parse(client, "R1")["error"]["type"] == "invalidArguments"
    bad = parse(client, ["R1"], properties=["nonsense"])
    assert bad["error"]["type"] == "invalidArguments"
    form = parse(client, ["R1"], properties=["header:From:asDate"])
    assert form["error"]["type"] == "invalidArguments"


def test_jmaplib_uploads_imports_parses_and_copies(server: Server, alice: Person) -> None:
    """jmaplib's typed models accept the upload, Email/import, Email/parse and Blob/copy answers."""
    from jmap.auth import BasicAuth
    from jmap.client import JMAPClient

    raw = with_attachment().replace(b"<report@x>", b"<jmaplib@x>")
    url = f"{server.base}/.well-known/jmap"
    with JMAPClient.connect(url, auth=BasicAuth(alice.name, PASSWORD)) as client:
        uploaded = client.upload(raw, content_type="message/rfc822")
        assert uploaded.size == len(raw) and uploaded.blob_id
        with client.batch() as batch:
            mailboxes = batch.mail.mailbox.get(ids=None)
        inbox = next(m for m in mailboxes.result.items if m.role == "inbox")
        with client.batch() as batch:
            imported = batch.mail.email.import_(
                emails={"k": {"blobId": uploaded.blob_id, "mailboxIds": {inbox.id: True}}}
            )
            parsed = batch.mail.email.parse(blob_ids=[uploaded.blob_id])
            copied = batch.core.blob.copy(  # core is no account capability: name it
                from_account_id=alice.jmap_account,
                blob_ids=[uploaded.blob_id],
                accountId=alice.jmap_account,
            )
        email = imported.result.created["k"]
        assert email.id and email.thread_id and email.size == len(raw)
        assert parsed.result.parsed[uploaded.blob_id].subject == "Quarterly report"
        assert copied.result.copied == {uploaded.blob_id: uploaded.blob_id}
