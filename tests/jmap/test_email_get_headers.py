"""Email/get header forms (RFC 8621 §4.1.2, §4.1.3) read from the raw message over HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from mailroom.store.engine import Store
from tests.helpers import ingest
from tests.jmap.conftest import Jmap, Person, email_id

RAW = (
    b"Return-Path: <bounce@example.org>\r\n"
    b"Received: from a.example by b.example\r\n"
    b"Received: from c.example\r\n\tby d.example\r\n"
    b"Subject: =?UTF-8?Q?Caf=C3=A9?= time\r\n folded here\r\n"
    b'From: "Smith, John" <john@example.com>, =?UTF-8?Q?Ren=C3=A9?= <rene@example.org>\r\n'
    b'To: Friends: jane@example.com, "Bob" <bob@example.net>;, solo@example.com\r\n'
    b"Cc: undisclosed-recipients:;\r\n"
    b"Sender: =?UTF-8?Q?Smith=2C_Jo?= <jo@example.com>\r\n"
    b"Date: Thu, 30 Oct 2014 14:12:00 +0800\r\n"
    b"Resent-Date: Fri, 31 Oct 2014 01:02:03 -0530\r\n"
    b"Message-ID: <headers@x>\r\n"
    b"References: <a@x> (first)\r\n <b@x>\r\n"
    b"List-Unsubscribe: <mailto:unsub@example.com>, (web)\r\n <https://example.com/u?id=1>\r\n"
    b"List-Id: Walrus fans <walrus.example.org>\r\n"
    b"X-Nospace:value\r\n"
    b"X-Multi: one\r\n"
    b"X-Multi: two\r\n"
    b"X-Latin: caf\xe9\r\n"
    b"X-Glued: Re:=?UTF-8?Q?x?= =?UTF-8?Q?a?=\r\n =?UTF-8?Q?b?=\r\n"
    b"X-When: Mon, 02 Jan 2006 15:04:05 -0700\r\n"
    b"MIME-Version: 1.0\r\n"
    b"Content-Type: text/plain; charset=utf-8\r\n"
    b"\r\n"
    b"Body.\r\n"
)
NO_DATE = b"From: a@example.org\r\nSubject: no date\r\n\r\nHi.\r\n"


@pytest.fixture
def emails(store: Store, alice: Person) -> dict[str, str]:
    """The header-rich message and one without a Date; key -> email id."""
    account = (alice.user_id, alice.account_id, alice.inbox)
    out = {}
    for key, raw in (("rich", RAW), ("nodate", NO_DATE)):
        (message_id,) = ingest(store, account, [(f"headers-{key}", raw)]).created_ids
        out[key] = email_id(message_id)
    return out


def read(client: Jmap, email: str, *properties: str) -> dict[str, Any]:
    """These properties of one email."""
    result = client.call("Email/get", {"ids": [email], "properties": list(properties)})
    assert "error" not in result, result
    return dict(result["list"][0])


def test_raw_form_keeps_leading_space_folding_and_encoded_words(
    client: Jmap, emails: dict[str, str]
) -> None:
    """asRaw (also the default form and `headers`) is every octet after the colon but the CRLF."""
    got = read(
        client,
        emails["rich"],
        "header:Subject",
        "header:subject:asRaw",
        "header:X-Nospace",
        "header:X-Latin",
        "header:Received:all",
        "headers",
    )
    folded = " =?UTF-8?Q?Caf=C3=A9?= time\r\n folded here"
    assert got["header:Subject"] == got["header:subject:asRaw"] == folded
    assert got["header:X-Nospace"] == "value"
    assert got["header:X-Latin"] == " caf\ufffd"
    assert got["header:Received:all"] == [
        " from a.example by b.example",
        " from c.example\r\n\tby d.example",
    ]
    assert got["headers"][0] == {"name": "Return-Path", "value": " <bounce@example.org>"}
    assert {"name": "Subject", "value": folded} in got["headers"]
    assert len(got["headers"]) == 22


def test_text_form_unfolds_and_decodes(client: Jmap, emails: dict[str, str]) -> None:
    """asText: unfolded, encoded words decoded, the leading space gone."""
    got = read(
        client,
        emails["rich"],
        "header:Subject:asText",
        "header:List-Id:asText",
        "header:X-Multi:asText:all",
        "header:X-Glued:asText",
    )
    assert got["header:Subject:asText"] == "Café time folded here"
    assert got["header:List-Id:asText"] == "Walrus fans <walrus.example.org>"
    assert got["header:X-Multi:asText:all"] == ["one", "two"]
    # RFC 2047 §5: a word glued to text is not decoded; space between two words goes.
    assert got["header:X-Glued:asText"] == "Re:=?UTF-8?Q?x?= ab"


def test_address_forms(client: Jmap, emails: dict[str, str]) -> None:
    """asAddresses flattens groups; asGroupedAddresses keeps them, loose ones in a null group."""
    got = read(
        client,
        emails["rich"],
        "header:From:asAddresses",
        "header:To:asAddresses",
        "header:To:asGroupedAddresses",
        "header:Cc:asGroupedAddresses",
        "header:Cc:asAddresses",
        "from",
        "sender",
    )
    assert got["header:From:asAddresses"] == [
        {"name": "Smith, John", "email": "john@example.com"},
        {"name": "René", "email": "rene@example.org"},
    ]
    jane = {"name": None, "email": "jane@example.com"}
    bob = {"name": "Bob", "email": "bob@example.net"}
    solo = {"name": None, "email": "solo@example.com"}
    assert got["header:To:asAddresses"] == [jane, bob, solo]
    assert got["header:To:asGroupedAddresses"] == [
        {"name": "Friends", "addresses": [jane, bob]},
        {"name": None, "addresses": [solo]},
    ]
    assert got["header:Cc:asGroupedAddresses"] == [
        {"name": "undisclosed-recipients", "addresses": []}
    ]
    assert got["header:Cc:asAddresses"] == []
    assert got["from"][0] == {"name": "Smith, John", "email": "john@example.com"}
    # an encoded comma in a display name does not split the address
    assert got["sender"] == [{"name": "Smith, Jo", "email": "jo@example.com"}]


def test_message_ids_dates_and_urls(client: Jmap, emails: dict[str, str]) -> None:
    """asMessageIds drops CFWS and brackets; asDate keeps the offset; asURLs lists the URLs."""
    got = read(
        client,
        emails["rich"],
        "header:References:asMessageIds",
        "header:Message-ID:asMessageIds",
        "header:Date:asDate",
        "header:Resent-Date:asDate",
        "header:X-When:asDate",
        "header:List-Unsubscribe:asURLs",
        "sentAt",
        "receivedAt",
        "references",
        "messageId",
    )
    assert got["header:References:asMessageIds"] == ["a@x", "b@x"] == got["references"]
    assert got["header:Message-ID:asMessageIds"] == ["headers@x"] == got["messageId"]
    assert got["header:Date:asDate"] == "2014-10-30T14:12:00+08:00" == got["sentAt"]
    assert got["header:Resent-Date:asDate"] == "2014-10-31T01:02:03-05:30"
    assert got["header:X-When:asDate"] == "2006-01-02T15:04:05-07:00"
    assert got["header:List-Unsubscribe:asURLs"] == [
        "mailto:unsub@example.com",
        "https://example.com/u?id=1",
    ]
    assert got["receivedAt"].endswith("Z")


def test_missing_headers_and_all(client: Jmap, emails: dict[str, str]) -> None:
    """A missing header is null, or [] with :all; without :all the last instance wins."""
    got = read(
        client,
        emails["nodate"],
        "header:Date:asDate",
        "header:X-None",
        "header:X-None:all",
        "header:To:asAddresses",
        "sentAt",
    )
    assert got["header:Date:asDate"] is None and got["sentAt"] is None
    assert got["header:X-None"] is None and got["header:X-None:all"] == []
    assert got["header:To:asAddresses"] is None
    rich = read(client, emails["rich"], "header:X-Multi", "header:X-Multi:all")
    assert rich["header:X-Multi"] == " two" and rich["header:X-Multi:all"] == [" one", " two"]


@pytest.mark.parametrize(
    "prop",
    [
        "header:Subject:asAddresses",
        "header:From:asText",
        "header:Received:asText",
        "header:Return-Path:asAddresses",
        "header:Date:asURLs",
        "header:List-Post:asDate",
        "header:Message-ID:asGroupedAddresses",
        "header:To:asMessageIds",
        "header:Subject:all:asText",
        "header:Subject:asText:all:all",
        "header:Subject:asNonsense",
        "header:",
        "header:Bad Name",
    ],
)
def test_forms_not_allowed_are_invalid_arguments(
    client: Jmap, emails: dict[str, str], prop: str
) -> None:
    """A form RFC 8621 does not allow for that header (or a malformed name) is invalidArguments."""
    result = client.call("Email/get", {"ids": [emails["rich"]], "properties": [prop]})
    assert result["error"]["type"] == "invalidArguments", prop


def test_unknown_headers_allow_every_form(client: Jmap, emails: dict[str, str]) -> None:
    """A header neither RFC 5322 nor RFC 2369 defines may be read in any form."""
    forms = [
        "asRaw",
        "asText",
        "asAddresses",
        "asGroupedAddresses",
        "asMessageIds",
        "asDate",
        "asURLs",
    ]
    got = read(client, emails["rich"], *(f"header:X-When:{form}" for form in forms))
    assert got["header:X-When:asText"] == "Mon, 02 Jan 2006 15:04:05 -0700"
    assert got["header:X-When:asURLs"] is None
