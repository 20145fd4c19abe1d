"""JMAP over sealed mail: Email/get, snippets and downloads show clear text, never ciphertext."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select, text, update

from mailroom.store.engine import Store
from mailroom.store.models import Blob, Message
from tests.factories import make_message
from tests.jmap.conftest import Jmap, Server, email_id, run_server, seed, uploaded


@pytest.fixture
def jmap_server(sealed_store: Store) -> Iterator[Server]:
    """The JMAP server over the sealing store."""
    yield from run_server(sealed_store)


def _url(client: Jmap, blob: str, name: str, type_: str) -> str:
    return (
        client.session["downloadUrl"]
        .replace("{accountId}", client.account)
        .replace("{blobId}", blob)
        .replace("{name}", name)
        .replace("{type}", type_)
    )


def test_email_get_and_downloads_open_sealed_mail(sealed_store: Store, jmap_server: Server) -> None:
    alice = seed(sealed_store, "alice")
    with sealed_store.session() as session:
        assert None not in session.scalars(select(Blob.user_id)).all()  # every blob sealed
    report = email_id(alice.messages["report"])
    with Jmap(jmap_server, alice) as client:
        (email,) = client.call(
            "Email/get",
            {
                "ids": [report],
                "properties": ["subject", "preview", "bodyValues", "textBody", "blobId"]
                + ["attachments", "header:X-Mailer", "sentAt"],
                "fetchAllBodyValues": True,
            },
        )["list"]
        values = " ".join(value["value"] for value in email["bodyValues"].values())
        assert "The numbers are attached." in values
        assert "mrf1." not in str(email)
        raw = client.http.get(_url(client, email["blobId"], "r.eml", "message/rfc822"))
        assert raw.status_code == 200 and b"Subject: Quarterly report" in raw.content
        assert b"The numbers are attached." in raw.content
        (pdf,) = email["attachments"]
        part = client.http.get(_url(client, pdf["blobId"], "report.pdf", "application/pdf"))
        assert part.status_code == 200 and part.content == b"%PDF-1.4 fake"
        snippets = client.call(
            "SearchSnippet/get", {"emailIds": [report], "filter": {"body": "numbers"}}
        )
        assert "mrf1." not in str(snippets)


def test_a_sealed_blob_copied_onto_another_row_does_not_open(
    sealed_store: Store, jmap_server: Server
) -> None:
    """Raw bytes moved to another message's blob: a one-sentence serverFail, no 500."""
    alice = seed(sealed_store, "alice")
    with sealed_store.session() as session:
        key_of = {row[0]: row[1] for row in session.execute(select(Message.id, Message.raw_sha256))}
        hello, report = key_of[alice.messages["hello"]], key_of[alice.messages["report"]]
        session.execute(
            update(Blob)
            .where(Blob.sha256 == report)
            .values(data=select(Blob.data).where(Blob.sha256 == hello).scalar_subquery())
        )
    with Jmap(jmap_server, alice) as client:
        answer = client.call(
            "Email/get",
            {
                "ids": [email_id(alice.messages["report"])],
                "properties": ["bodyValues"],
                "fetchAllBodyValues": True,
            },
        )
        error = answer["error"]
        assert error["type"] == "serverFail"
        assert "does not open" in error["description"]
        assert "\n" not in error["description"]
        with sealed_store.session() as session:
            session.execute(text("SELECT 1"))  # the store is still fine


def test_the_header_filter_finds_sealed_mail(sealed_store: Store, jmap_server: Server) -> None:
    """Sealed header lists are opened and matched: Email/query's header filter still works."""
    alice = seed(sealed_store, "alice")
    with Jmap(jmap_server, alice) as client:

        def query(header: list[str]) -> list[str]:
            found: list[str] = client.call("Email/query", {"filter": {"header": header}})["ids"]
            return found

        assert query(["In-Reply-To"]) == [email_id(alice.messages["reply"])]
        assert query(["Subject", "lunch"]) == [email_id(alice.messages["other"])]
        assert query(["Subject", "walrus nowhere"]) == []
        assert query(["X-Not-There"]) == []


def test_an_upload_is_sealed_and_imports_downloads_and_parses_clear(
    sealed_store: Store, jmap_server: Server
) -> None:
    """A JMAP upload of sealed mail is kept sealed (the source of Email/import is mail);
    download, Email/parse and Email/import read it clear, and the import reuses its bytes."""
    alice = seed(sealed_store, "alice")
    raw = make_message(
        "upload@x",
        subject="Walrus itinerary",
        sender="Ann <ann.upload@example.org>",
        body="The upload travels sealed.\n",
    )
    with Jmap(jmap_server, alice) as client:
        blob_id = uploaded(client, raw)
        with sealed_store.engine.connect() as conn:
            stored = b"\n".join(
                bytes(row[0]) for row in conn.execute(text("SELECT data FROM blobs")).all()
            )
        for clear in (b"Walrus itinerary", b"ann.upload@example.org", b"travels sealed"):
            assert clear not in stored
        download = client.http.get(_url(client, blob_id, "u.eml", "message/rfc822"))
        assert download.status_code == 200 and download.content == raw
        parsed = client.call("Email/parse", {"blobIds": [blob_id], "properties": ["subject"]})
        assert parsed["parsed"][blob_id]["subject"] == "Walrus itinerary"
        mailboxes = client.call("Mailbox/get", {"ids": None, "properties": ["role"]})["list"]
        inbox = next(m["id"] for m in mailboxes if m["role"] == "inbox")
        result = client.call(
            "Email/import", {"emails": {"k": {"blobId": blob_id, "mailboxIds": {inbox: True}}}}
        )
        created = result["created"]["k"]
        (email,) = client.call("Email/get", {"ids": [created["id"]], "properties": ["subject"]})[
            "list"
        ]
        assert email["subject"] == "Walrus itinerary"
        again = client.http.get(_url(client, created["blobId"], "i.eml", "message/rfc822"))
        assert again.content == raw
    with sealed_store.session() as session:
        assert (
            session.scalar(text("SELECT count(*) FROM blobs WHERE size = :n"), {"n": len(raw)}) == 1
        )
