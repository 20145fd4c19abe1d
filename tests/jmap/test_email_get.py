"""Email/get properties, body parts and values, headers, and blob downloads."""

from __future__ import annotations

from tests.jmap.conftest import Jmap, Person, Server, email_id


def test_default_properties_and_addresses(client: Jmap, alice: Person) -> None:
    """Without `properties` an Email has RFC 8621's default set with the parsed addresses."""
    reply = email_id(alice.messages["reply"])
    (email,) = client.call("Email/get", {"ids": [reply]})["list"]
    assert email["id"] == reply and email["blobId"] == f"R{alice.messages['reply']}"
    assert email["from"] == [{"name": "Bob", "email": "bob@example.net"}]
    assert email["to"] == [{"name": "Alice", "email": "alice@example.org"}]
    assert email["subject"] == "Re: Hello walrus"
    assert email["inReplyTo"] == ["hello@x"] and email["references"] == ["hello@x"]
    assert email["messageId"] == ["reply@x"]
    assert email["receivedAt"] == "2024-03-01T09:05:00Z"
    assert email["mailboxIds"] == {f"L{alice.inbox}": True} and email["keywords"] == {}
    assert email["preview"].startswith("The walrus") and email["size"] > 0
    assert email["bodyValues"] == {}  # not fetched unless asked
    assert [p["type"] for p in email["textBody"]] == ["text/plain"]
    assert "bodyStructure" not in email and "headers" not in email


def test_body_structure_values_and_attachments(client: Jmap, alice: Person) -> None:
    """Text, HTML and attachment parts carry part ids, blob ids and (when asked) values."""
    report = email_id(alice.messages["report"])
    (email,) = client.call(
        "Email/get",
        {
            "ids": [report],
            "properties": ["bodyStructure", "textBody", "htmlBody", "attachments", "bodyValues"],
            "fetchAllBodyValues": True,
            "maxBodyValueBytes": 8,
        },
    )["list"]
    assert email["bodyStructure"]["type"] == "multipart/mixed"
    assert email["bodyStructure"]["partId"] is None
    (text,) = email["textBody"]
    (html,) = email["htmlBody"]
    (pdf,) = email["attachments"]
    assert text["type"] == "text/plain" and html["type"] == "text/html"
    assert pdf["name"] == "report.pdf" and pdf["type"] == "application/pdf"
    assert pdf["disposition"] == "attachment" and pdf["size"] == len(b"%PDF-1.4 fake")
    assert email["bodyValues"][text["partId"]] == {
        "value": "The numb",
        "isEncodingProblem": False,
        "isTruncated": True,
    }
    assert email["bodyValues"][html["partId"]]["value"].startswith("<p>The ")
    (full,) = client.call(
        "Email/get",
        {
            "ids": [report],
            "properties": ["bodyStructure"],
            "bodyProperties": ["partId", "subParts", "headers"],
        },  # noqa: E501
    )["list"]
    children = full["bodyStructure"]["subParts"]
    assert [c["partId"] for c in children] == [None, pdf["partId"]]
    assert any(h["name"].lower() == "content-type" for h in children[1]["headers"])


def test_header_properties(client: Jmap, alice: Person) -> None:
    """header:Name forms: raw text, addresses, message ids, dates and :all."""
    report = email_id(alice.messages["report"])
    (email,) = client.call(
        "Email/get",
        {
            "ids": [report],
            "properties": [
                "header:Subject",
                "header:Cc:asAddresses",
                "header:Message-ID:asMessageIds",
                "header:Date:asDate",
                "header:X-Missing",
                "header:Received:all",
                "headers",
            ],
        },
    )["list"]
    assert email["header:Subject"].strip() == "Quarterly report"
    assert email["header:Cc:asAddresses"] == [{"name": "Dave", "email": "dave@example.org"}]
    assert email["header:Message-ID:asMessageIds"] == ["report@x"]
    assert email["header:Date:asDate"] == "2024-03-01T12:00:00Z"
    assert email["header:X-Missing"] is None and email["header:Received:all"] == []
    assert {"name": "Subject", "value": "Quarterly report"} in [
        {"name": h["name"], "value": h["value"].strip()} for h in email["headers"]
    ]
    bad = client.call("Email/get", {"ids": [report], "properties": ["header:Subject:asNonsense"]})
    assert bad["error"]["type"] == "invalidArguments"


def test_download_raw_message_and_attachment(client: Jmap, alice: Person, server: Server) -> None:
    """downloadUrl serves the raw message and the decoded attachment, never inline-runnable."""
    report = email_id(alice.messages["report"])
    (email,) = client.call("Email/get", {"ids": [report], "properties": ["blobId", "attachments"]})[
        "list"
    ]
    template = client.session["downloadUrl"]

    def url(blob: str, name: str, type_: str) -> str:
        return (
            template.replace("{accountId}", client.account)
            .replace("{blobId}", blob)
            .replace("{name}", name)
            .replace("{type}", type_)
        )

    raw = client.http.get(url(email["blobId"], "report.eml", "message/rfc822"))
    assert raw.status_code == 200 and b"Subject: Quarterly report" in raw.content
    assert raw.headers["content-type"].startswith("message/rfc822")
    (pdf,) = email["attachments"]
    part = client.http.get(url(pdf["blobId"], "report.pdf", "application/pdf"))
    assert part.status_code == 200 and part.content == b"%PDF-1.4 fake"
    assert "attachment" in part.headers["content-disposition"]
    hostile = client.http.get(url(pdf["blobId"], "x.html", "text/html"))
    assert hostile.headers["x-content-type-options"] == "nosniff"
    assert "sandbox" in hostile.headers["content-security-policy"]
    for missing in ("R999999", "A999999-1", f"{pdf['blobId']}-9", "nonsense"):
        assert client.http.get(url(missing, "x", "application/octet-stream")).status_code == 404
