"""Email/get body parts: RFC 8621 §4.1.4 textBody/htmlBody/attachments, part properties, values.

Every message here is raw bytes with an odd but real-world structure, stored
through the ingest and read back over HTTP on both stores.
"""

from __future__ import annotations

from typing import Any

import pytest

from mailroom.store.engine import Store
from tests.helpers import ingest
from tests.jmap.conftest import Jmap, Person, email_id

HEAD = (
    "From: Carol <carol@example.org>\r\n"
    "To: Alice <alice@example.org>\r\n"
    "Subject: {subject}\r\n"
    "Date: Fri, 01 Mar 2024 12:00:00 +0000\r\n"
    "Message-ID: <{key}@structure.test>\r\n"
)
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9a"
    "wAAAABJRU5ErkJggg=="
)


def mime(key: str, body: str, *, content_type: str | None) -> bytes:
    """A message with our headers, an optional top Content-Type and this body."""
    head = HEAD.format(subject=f"Structure {key}", key=key)
    if content_type is not None:
        head += f"MIME-Version: 1.0\r\nContent-Type: {content_type}\r\n"
    return (head + "\r\n" + body).encode("utf-8")


NESTED = mime(
    "nested",
    "--outer\r\n"
    'Content-Type: multipart/alternative; boundary="alt"\r\n\r\n'
    "--alt\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nPlain words.\r\n"
    '--alt\r\nContent-Type: multipart/related; boundary="rel"\r\n\r\n'
    '--rel\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>See <img src="cid:logo@x"></p>\r\n'
    "--rel\r\nContent-Type: image/png\r\nContent-ID: <logo@x>\r\n"
    "Content-Disposition: inline\r\nContent-Transfer-Encoding: base64\r\n\r\n"
    f"{PNG}\r\n"
    "--rel--\r\n"
    "--alt--\r\n"
    "--outer\r\nContent-Type: application/pdf; name=report.pdf\r\n"
    'Content-Disposition: attachment; filename="report.pdf"\r\n'
    "Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQgZmFrZQ==\r\n"
    "--outer\r\nContent-Type: message/rfc822\r\n\r\n"
    "From: Dave <dave@example.org>\r\nSubject: Forwarded\r\n\r\nInner body.\r\n"
    "--outer\r\nContent-Type: text/calendar; charset=utf-8; method=REQUEST\r\n\r\n"
    "BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n"
    "--outer--\r\n",
    content_type='multipart/mixed; boundary="outer"',
)
INLINE_MEDIA_IN_ALTERNATIVE = mime(
    "media",
    "--alt\r\nContent-Type: multipart/mixed; boundary=m1\r\n\r\n"
    "--m1\r\nContent-Type: text/plain\r\n\r\nBefore the picture.\r\n"
    "--m1\r\nContent-Type: image/png\r\nContent-Disposition: inline\r\n"
    f"Content-Transfer-Encoding: base64\r\n\r\n{PNG}\r\n"
    "--m1\r\nContent-Type: text/plain\r\n\r\nAfter the picture.\r\n"
    "--m1--\r\n"
    "--alt\r\nContent-Type: multipart/mixed; boundary=m2\r\n\r\n"
    "--m2\r\nContent-Type: text/html\r\n\r\n<p>Before</p>\r\n"
    "--m2\r\nContent-Type: image/png\r\nContent-Disposition: inline\r\n"
    f"Content-Transfer-Encoding: base64\r\n\r\n{PNG}\r\n"
    "--m2\r\nContent-Type: text/html\r\n\r\n<p>After</p>\r\n"
    "--m2--\r\n"
    "--alt--\r\n",
    content_type="multipart/alternative; boundary=alt",
)
MIXED_WITH_INLINE_IMAGE = mime(
    "mixed",
    "--m\r\nContent-Type: text/plain\r\n\r\nOne.\r\n"
    "--m\r\nContent-Type: image/gif\r\n"
    f"Content-Transfer-Encoding: base64\r\n\r\n{PNG}\r\n"
    "--m\r\nContent-Type: text/plain\r\n\r\nTwo.\r\n"
    "--m\r\nContent-Type: text/plain; name=notes.txt\r\n\r\nA text file.\r\n"
    "--m--\r\n",
    content_type="multipart/mixed; boundary=m",
)
HTML_ONLY_ALTERNATIVE = mime(
    "htmlonly",
    "--a\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Only HTML</p>\r\n"
    "--a\r\nContent-Type: image/png\r\nContent-Transfer-Encoding: base64\r\n\r\n"
    f"{PNG}\r\n--a--\r\n",
    content_type="multipart/alternative; boundary=a",
)
NO_CONTENT_TYPE = mime("bare", "Just bytes, no MIME at all.\r\n", content_type=None)
BAD_CHARSET = (
    HEAD.format(subject="Bad charset", key="badcs")
    + "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=x-no-such-charset\r\n"
    "Content-Language: en, fr\r\nContent-Location: https://example.org/note\r\n"
    "Content-Transfer-Encoding: 8bit\r\n\r\n"
).encode() + b"caf\xe9 cr\xe8me\r\n"
LONG_VALUES = mime(
    "long",
    "--a\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nh\u00e9llo w\u00f6rld\r\n"
    '--a\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Hi <a href="https://x.example/">'
    "there</a></p>\r\n--a--\r\n",
    content_type="multipart/alternative; boundary=a",
)


@pytest.fixture
def stored(store: Store, alice: Person) -> dict[str, str]:
    """The odd messages above, each stored through the ingest; key -> email id."""
    account = (alice.user_id, alice.account_id, alice.inbox)
    raws = {
        "nested": NESTED,
        "media": INLINE_MEDIA_IN_ALTERNATIVE,
        "mixed": MIXED_WITH_INLINE_IMAGE,
        "htmlonly": HTML_ONLY_ALTERNATIVE,
        "bare": NO_CONTENT_TYPE,
        "badcs": BAD_CHARSET,
        "long": LONG_VALUES,
    }
    out: dict[str, str] = {}
    for key, raw in raws.items():
        (message_id,) = ingest(store, account, [(f"structure-{key}", raw)]).created_ids
        out[key] = email_id(message_id)
    return out


def get(client: Jmap, email: str, **args: Any) -> dict[str, Any]:
    """One Email/get of one email; its object."""
    result = client.call("Email/get", {"ids": [email], **args})
    assert "error" not in result, result
    (found,) = result["list"]
    return dict(found)


def ids_of(parts: list[dict[str, Any]]) -> list[str]:
    """The part ids of a body list."""
    return [part["partId"] for part in parts]


BODY_LISTS = ["textBody", "htmlBody", "attachments"]


def test_nested_alternative_related_and_attachments(client: Jmap, stored: dict[str, str]) -> None:
    """mixed(alternative(plain, related(html, cid image)), pdf, rfc822, calendar), RFC-sorted."""
    email = get(client, stored["nested"], properties=BODY_LISTS)
    assert ids_of(email["textBody"]) == ["1.1"]
    assert ids_of(email["htmlBody"]) == ["1.2.1"]
    assert ids_of(email["attachments"]) == ["1.2.2", "2", "3", "4"]
    image, pdf, forwarded, calendar = email["attachments"]
    assert image["type"] == "image/png" and image["cid"] == "logo@x"
    assert image["disposition"] == "inline" and image["name"] is None
    assert image["charset"] is None and image["size"] == 70
    assert pdf["name"] == "report.pdf" and pdf["disposition"] == "attachment"
    assert pdf["size"] == len(b"%PDF-1.4 fake")
    assert forwarded["type"] == "message/rfc822" and forwarded["charset"] is None
    assert calendar["type"] == "text/calendar" and calendar["charset"] == "utf-8"
    assert set(image) == {
        "partId",
        "blobId",
        "size",
        "name",
        "type",
        "charset",
        "disposition",
        "cid",
        "language",
        "location",
    }


def test_inline_media_inside_alternative_is_body_and_attachment(
    client: Jmap, stored: dict[str, str]
) -> None:
    """An inline image in a mixed part of an alternative is in its body list and in attachments."""
    email = get(client, stored["media"], properties=BODY_LISTS)
    assert ids_of(email["textBody"]) == ["1.1", "1.2", "1.3"]
    assert ids_of(email["htmlBody"]) == ["2.1", "2.2", "2.3"]
    assert ids_of(email["attachments"]) == ["1.2", "2.2"]


def test_inline_image_in_mixed_is_in_both_bodies_only(client: Jmap, stored: dict[str, str]) -> None:
    """In a plain mixed part an inline image is in textBody and htmlBody, a named text is not."""
    email = get(client, stored["mixed"], properties=BODY_LISTS)
    assert ids_of(email["textBody"]) == ["1", "2", "3"]
    assert ids_of(email["htmlBody"]) == ["1", "2", "3"]
    assert ids_of(email["attachments"]) == ["4"]
    assert email["attachments"][0]["name"] == "notes.txt"


def test_html_only_alternative_fills_text_body(client: Jmap, stored: dict[str, str]) -> None:
    """HTML alone in an alternative is textBody too; a non-text alternative is an attachment."""
    email = get(client, stored["htmlonly"], properties=BODY_LISTS)
    assert ids_of(email["textBody"]) == ids_of(email["htmlBody"]) == ["1"]
    assert ids_of(email["attachments"]) == ["2"]


def test_message_without_content_type(client: Jmap, stored: dict[str, str]) -> None:
    """No Content-Type: one text/plain us-ascii part "1", its value fetched as text."""
    email = get(
        client,
        stored["bare"],
        properties=["bodyStructure", "textBody", "htmlBody", "bodyValues"],
        fetchTextBodyValues=True,
    )
    root = email["bodyStructure"]
    assert root["partId"] == "1" and root["type"] == "text/plain"
    assert root["charset"] == "us-ascii" and root["subParts"] is None
    assert ids_of(email["textBody"]) == ids_of(email["htmlBody"]) == ["1"]
    assert email["bodyValues"]["1"] == {
        "value": "Just bytes, no MIME at all.\n",
        "isEncodingProblem": False,
        "isTruncated": False,
    }


def test_bad_charset_is_an_encoding_problem(client: Jmap, stored: dict[str, str]) -> None:
    """An unknown charset gives text flagged isEncodingProblem; language and location are read."""
    email = get(
        client, stored["badcs"], properties=["textBody", "bodyValues"], fetchAllBodyValues=True
    )
    (part,) = email["textBody"]
    assert part["charset"] == "x-no-such-charset"
    assert part["language"] == ["en", "fr"] and part["location"] == "https://example.org/note"
    value = email["bodyValues"]["1"]
    assert value["isEncodingProblem"] is True and value["value"].startswith("caf")


def test_body_structure_has_sub_parts_by_default(client: Jmap, stored: dict[str, str]) -> None:
    """bodyStructure without bodyProperties is the whole tree; body lists have no subParts."""
    email = get(client, stored["nested"], properties=["bodyStructure", "textBody"])
    root = email["bodyStructure"]
    assert root["type"] == "multipart/mixed" and root["partId"] is None and root["blobId"] is None
    assert [p["type"] for p in root["subParts"]] == [
        "multipart/alternative",
        "application/pdf",
        "message/rfc822",
        "text/calendar",
    ]
    related = root["subParts"][0]["subParts"][1]
    assert [p["partId"] for p in related["subParts"]] == ["1.2.1", "1.2.2"]
    assert related["subParts"][0]["subParts"] is None
    assert "subParts" not in email["textBody"][0]


def test_body_properties_are_exactly_what_was_asked(client: Jmap, stored: dict[str, str]) -> None:
    """bodyProperties picks the part properties, header forms included; bad ones are refused."""
    email = get(
        client,
        stored["nested"],
        properties=["bodyStructure", "attachments"],
        bodyProperties=[
            "partId",
            "type",
            "header:Content-Type",
            "header:Content-ID:asMessageIds",
            "header:X-Nope:all",
            "headers",
        ],
    )
    root = email["bodyStructure"]
    assert set(root) == {
        "partId",
        "type",
        "header:Content-Type",
        "header:Content-ID:asMessageIds",
        "header:X-Nope:all",
        "headers",
    }
    assert root["header:Content-Type"] == ' multipart/mixed; boundary="outer"'
    image = email["attachments"][0]
    assert image["header:Content-ID:asMessageIds"] == ["logo@x"]
    assert image["header:X-Nope:all"] == []
    assert {"name": "Content-ID", "value": " <logo@x>"} in image["headers"]
    for bad in (["header:Subject:asDate"], ["nonsense"], ["header:X:asWhat"]):
        result = client.call("Email/get", {"ids": [stored["nested"]], "bodyProperties": bad})
        assert result["error"]["type"] == "invalidArguments", bad


def test_fetch_flags_choose_the_values(client: Jmap, stored: dict[str, str]) -> None:
    """fetchText/HTML give their lists' text parts; fetchAll every text/* part of the tree."""
    nested = stored["nested"]

    def values(**flags: bool) -> set[str]:
        return set(get(client, nested, properties=["bodyValues"], **flags)["bodyValues"])

    assert values() == set()
    assert values(fetchTextBodyValues=True) == {"1.1"}
    assert values(fetchHTMLBodyValues=True) == {"1.2.1"}
    assert values(fetchTextBodyValues=True, fetchHTMLBodyValues=True) == {"1.1", "1.2.1"}
    assert values(fetchAllBodyValues=True) == {"1.1", "1.2.1", "4"}
    media = get(client, stored["media"], properties=["bodyValues"], fetchTextBodyValues=True)
    assert set(media["bodyValues"]) == {"1.1", "1.3"}  # the image in textBody has no value


def test_max_body_value_bytes_cuts_on_character_and_tag_boundaries(
    client: Jmap, stored: dict[str, str]
) -> None:
    """maxBodyValueBytes cuts whole UTF-8 characters and never inside an HTML tag."""

    def cut(limit: int) -> dict[str, Any]:
        email = get(
            client,
            stored["long"],
            properties=["bodyValues"],
            fetchAllBodyValues=True,
            maxBodyValueBytes=limit,
        )
        return dict(email["bodyValues"])

    assert cut(2)["1"] == {"value": "h", "isEncodingProblem": False, "isTruncated": True}
    assert cut(3)["1"]["value"] == "h\u00e9"
    assert cut(12)["2"] == {"value": "<p>Hi ", "isEncodingProblem": False, "isTruncated": True}
    whole = cut(1000)
    assert whole["1"] == {
        "value": "h\u00e9llo w\u00f6rld",  # the CRLF before a boundary is the boundary's
        "isEncodingProblem": False,
        "isTruncated": False,
    }
    for bad in (-1, "10", 2**53):
        result = client.call("Email/get", {"ids": [stored["long"]], "maxBodyValueBytes": bad})
        assert result["error"]["type"] == "invalidArguments", bad


def test_part_blobs_download_the_decoded_bytes(client: Jmap, stored: dict[str, str]) -> None:
    """The blobId of each attachment downloads exactly `size` decoded octets (a message as sent)."""
    email = get(client, stored["nested"], properties=["attachments"])
    template = client.session["downloadUrl"]
    for part in email["attachments"]:
        url = (
            template.replace("{accountId}", client.account)
            .replace("{blobId}", part["blobId"])
            .replace("{name}", "part")
            .replace("{type}", "application/octet-stream")
        )
        response = client.http.get(url)
        assert response.status_code == 200 and len(response.content) == part["size"], part
        if part["type"] == "message/rfc822":  # the forwarded message, octet for octet
            assert response.content == (
                b"From: Dave <dave@example.org>\r\nSubject: Forwarded\r\n\r\nInner body."
            )


def test_email_level_properties(client: Jmap, stored: dict[str, str]) -> None:
    """size is the raw size, receivedAt a UTCDate, preview plain text of at most 256 characters."""
    email = get(
        client, stored["nested"], properties=["size", "receivedAt", "preview", "hasAttachment"]
    )
    assert email["size"] == len(NESTED)
    assert email["receivedAt"].endswith("Z") and len(email["receivedAt"]) == 20
    assert email["preview"].startswith("Plain words") and len(email["preview"]) <= 256
    assert email["hasAttachment"] is True
