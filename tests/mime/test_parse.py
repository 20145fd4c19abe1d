"""parse_message on hand-made messages: fields, bodies, attachments, notes, caps."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone

from mailroom.mime import Address, Attachment, parse_message
from tests.mime.samples import check_invariants, message, sample

RECEIVED = datetime(2024, 2, 1, 12, 0, tzinfo=UTC)


def test_plain_message_fields() -> None:
    """A plain UTF-8 message yields decoded, normalized headers and its text body."""
    raw = sample("plain")
    parsed = parse_message(raw)
    check_invariants(parsed, raw)
    assert parsed.subject == "Lunch plans — Tuesday"
    assert parsed.from_ == [Address("Alice Example", "alice@example.org")]
    assert parsed.to == [Address("Bob", "bob@example.net"), Address("", "carol@example.net")]
    assert parsed.cc == [Address("Jörg Müller", "joerg@example.de")]
    assert parsed.bcc == [] and parsed.reply_to == [] and parsed.sender is None
    assert parsed.date == datetime(2024, 1, 2, 10, 0, tzinfo=UTC)
    assert parsed.message_id == "lunch.1@example.org"
    assert parsed.in_reply_to == ["prev.0@example.net"]
    assert parsed.references == ["root@example.net", "prev.0@example.net"]
    assert "The café opens at 11." in parsed.text_body
    assert parsed.html_body is None and parsed.sanitized_html is None
    assert parsed.preview == "Hi Bob, Shall we meet at noon? The café opens at 11."
    assert parsed.attachments == []
    assert parsed.notes == []
    assert parsed.size == len(raw)


def test_header_lookup_is_case_insensitive_and_decoded() -> None:
    """header() returns the first decoded value, header_all() every value, None if absent."""
    parsed = parse_message(sample("plain"))
    assert parsed.header("SUBJECT") == "Lunch plans — Tuesday"
    assert parsed.header("message-id") == "< lunch.1@example.org >"
    assert len(parsed.header_all("received")) == 1
    assert parsed.header("x-not-there") is None
    assert parsed.header_all("x-not-there") == []
    assert parsed.headers[0][0] == "Return-Path"


def test_alternative_message_bodies_and_sanitizing() -> None:
    """multipart/alternative gives the plain part as text and a sanitized copy of the HTML."""
    raw = sample("alternative")
    parsed = parse_message(raw)
    check_invariants(parsed, raw)
    assert parsed.text_body == "Café news: the weekly digest is here. \nRead it online."
    assert parsed.html_body is not None and "<script>" in parsed.html_body
    assert parsed.sanitized_html is not None
    assert "script" not in parsed.sanitized_html and "onclick" not in parsed.sanitized_html
    assert "<b>weekly</b>" in parsed.sanitized_html
    assert 'rel="noopener noreferrer"' in parsed.sanitized_html
    assert parsed.date == datetime(2024, 1, 3, 13, 0, tzinfo=UTC)
    assert parsed.notes == []


def test_html_only_message_gets_text_from_html() -> None:
    """With only HTML, text_body and the preview are derived from it (no style/title text)."""
    parsed = parse_message(sample("html_only"))
    assert parsed.text_body == "Thanks for your order\n\nTotal: 42 €\n\nItem Qty\nMug 2"
    assert parsed.preview == "Thanks for your order Total: 42 € Item Qty Mug 2"
    assert parsed.html_body is not None and parsed.sanitized_html is not None
    assert "<h1>Thanks for your order</h1>" in parsed.sanitized_html


def test_attachments_and_imap_part_numbers() -> None:
    """Attachments carry IMAP part numbers, decoded sizes, filenames, content ids."""
    raw = sample("attachments")
    parsed = parse_message(raw)
    check_invariants(parsed, raw)
    assert parsed.text_body == "See the report attached."
    assert parsed.html_body is not None and "cid:logo@example.org" in parsed.html_body
    assert parsed.sanitized_html is not None
    assert 'src="cid:logo@example.org"' in parsed.sanitized_html
    png, pdf, forwarded, notes_txt = parsed.attachments
    assert png == Attachment(None, "image/png", 70, "logo@example.org", "inline", "1.2")
    assert pdf == Attachment("Q1 résumé.pdf", "application/pdf", 54, None, "attachment", "2")
    assert forwarded.content_type == "message/rfc822"
    assert forwarded.part_path == "3" and forwarded.size > 40
    assert notes_txt == Attachment("notes.txt", "text/plain", 14, None, "attachment", "4")
    assert "Inner body" not in parsed.text_body


def test_single_part_attachment_is_part_one() -> None:
    """A message whose only part is a PDF has that part as attachment "1" and no text."""
    raw = message(
        "From: a@x.org\nContent-Type: application/pdf\nContent-Transfer-Encoding: base64",
        b"JVBERi0xLjQK\n",
    )
    parsed = parse_message(raw)
    assert parsed.attachments == [Attachment(None, "application/pdf", 9, None, None, "1")]
    assert parsed.text_body == ""


def test_missing_date_uses_received_time_with_note() -> None:
    """No Date header: the received time is used and the documented note is added."""
    parsed = parse_message(message("From: a@x.org\nSubject: s"), received_at=RECEIVED)
    assert parsed.date == RECEIVED
    assert "date: missing, used received time" in parsed.notes


def test_unparseable_date_uses_received_time_with_notes() -> None:
    """A junk Date value is reported, then the received time is used."""
    raw = message("From: a@x.org\nDate: the day after tomorrow")
    parsed = parse_message(raw, received_at=RECEIVED)
    assert parsed.date == RECEIVED
    assert "date: missing, used received time" in parsed.notes
    assert any(n.startswith("date: unparseable value") for n in parsed.notes)


def test_missing_date_without_received_time_is_none() -> None:
    """No Date and no received time gives date None and a note."""
    parsed = parse_message(message("From: a@x.org"))
    assert parsed.date is None
    assert "date: missing" in parsed.notes


def test_dates_are_converted_to_utc() -> None:
    """Zoned dates convert to UTC; zone-less dates and naive received times count as UTC."""
    parsed = parse_message(message("Date: Mon, 1 Jan 2024 23:30:00 -0230"))
    assert parsed.date == datetime(2024, 1, 2, 2, 0, tzinfo=UTC)
    parsed = parse_message(message("Date: Mon, 1 Jan 2024 23:30:00"))
    assert parsed.date == datetime(2024, 1, 1, 23, 30, tzinfo=UTC)
    assert "date: no time zone, assumed UTC" in parsed.notes
    parsed = parse_message(message("Subject: x"), received_at=datetime(2024, 1, 1, 8, 0))
    assert parsed.date == datetime(2024, 1, 1, 8, 0, tzinfo=UTC)
    tz = timezone(timedelta(hours=5))
    parsed = parse_message(message("Subject: x"), received_at=datetime(2024, 1, 1, 8, 0, tzinfo=tz))
    assert parsed.date == datetime(2024, 1, 1, 3, 0, tzinfo=UTC)


def test_crlf_and_lf_messages_parse_the_same() -> None:
    """CRLF line endings give the same record as LF ones (apart from size)."""
    lf = parse_message(sample("alternative"))
    crlf = parse_message(sample("alternative").replace(b"\n", b"\r\n"))
    assert crlf.text_body == lf.text_body
    assert crlf.subject == lf.subject and crlf.headers == lf.headers
    assert crlf.attachments == lf.attachments


def test_raw_8bit_headers_and_unknown_charsets_are_decoded_with_notes() -> None:
    """cp1252 bytes in headers and an unknown body charset decode by fallback, with notes."""
    raw = (
        b"From: \x93Jos\xe9\x94 <jose@x.org>\nSubject: Caf\xe9 \x96 menu\n"
        b"Content-Type: text/plain; charset=x-unheard-of\n\ncaf\xc3\xa9\n"
    )
    parsed = parse_message(raw)
    assert parsed.subject == "Café – menu"
    assert parsed.from_ == [Address("“José”", "jose@x.org")]
    assert parsed.text_body == "café\n"
    assert any("windows-1252" in n for n in parsed.notes)
    assert any("x-unheard-of" in n for n in parsed.notes)


def test_us_ascii_body_with_8bit_data_is_noted() -> None:
    """A us-ascii body holding UTF-8 is decoded as UTF-8 and noted."""
    raw = message("Content-Type: text/plain; charset=us-ascii", "naïve résumé")
    parsed = parse_message(raw)
    assert parsed.text_body == "naïve résumé"
    assert any("us-ascii" in n and "utf-8" in n for n in parsed.notes)


def test_broken_mime_structures_are_repaired_with_notes() -> None:
    """Missing boundaries, bad base64 and a sloppy Content-Type still give a body."""
    no_boundary = parse_message(message("Content-Type: multipart/mixed", "just text"))
    assert no_boundary.text_body == "just text"
    assert any("boundary" in n for n in no_boundary.notes)

    bad_b64 = parse_message(
        message("Content-Type: text/plain\nContent-Transfer-Encoding: base64 ", "aGVsbG8gd29ybGQ")
    )
    assert bad_b64.text_body == "hello world"
    assert any("base64" in n for n in bad_b64.notes)

    sloppy = parse_message(message("Content-Type: TEXT/PLAIN charset=US-ASCII", "body"))
    assert sloppy.text_body == "body" and sloppy.attachments == []

    head = 'Content-Type: multipart/mixed; boundary="b"'
    unclosed = parse_message(message(head, "--b\nContent-Type: text/plain\n\nhi\n"))
    assert unclosed.text_body.strip() == "hi"
    assert unclosed.notes


def test_message_id_missing_or_empty_is_noted() -> None:
    """A missing or empty Message-ID gives None and a note."""
    assert "message-id: missing" in parse_message(message("From: a@x.org")).notes
    parsed = parse_message(message("Message-ID: <>"))
    assert parsed.message_id is None
    assert "message-id: unusable value" in parsed.notes


def test_empty_and_non_bytes_input() -> None:
    """Empty bytes and even wrong input types give an (empty) record, never an exception."""
    empty = parse_message(b"")
    check_invariants(empty, b"")
    assert empty.subject == "" and empty.text_body == "" and empty.size == 0
    text_input = parse_message("Subject: hi\n\nbody")  # type: ignore[arg-type]
    assert text_input.subject == "hi"
    assert any(n.startswith("input:") for n in text_input.notes)
    junk_input = parse_message(None)  # type: ignore[arg-type]
    assert junk_input.size == 0 and junk_input.notes


def test_huge_header_block_is_capped_quickly() -> None:
    """Several MB of headers parse in well under a few seconds, capped at 1000 with a note."""
    block = "".join(f"X-Filler-{i}: {'v' * 90}\n" for i in range(60_000))
    raw = message(block + "Subject: found it\nFrom: a@x.org", "body")
    start = time.perf_counter()
    parsed = parse_message(raw)
    elapsed = time.perf_counter() - start
    assert elapsed < 5.0
    assert len(parsed.headers) == 1000
    assert parsed.subject == "found it"  # well-known fields are found past the cap
    assert parsed.text_body == "body"
    assert any(n.startswith("headers: 60002 header fields") for n in parsed.notes)


def test_one_megabyte_header_line_is_truncated_quickly() -> None:
    """A single 1 MB header line costs little and is cut to 64 KiB with a note."""
    raw = message("Subject: " + "=?utf-8?q?ab?= " * 70_000 + "\nTo: " + "x" * 1_000_000, "body")
    start = time.perf_counter()
    parsed = parse_message(raw)
    assert time.perf_counter() - start < 3.0
    assert 0 < len(parsed.subject) <= 65536
    assert any("truncated" in n for n in parsed.notes)
    assert parsed.text_body == "body"


def test_deep_nesting_and_many_parts_do_not_break_parsing() -> None:
    """Thousands of nested multiparts or parts end in a capped, noted parse, never an error."""
    deep = b"".join(
        b'Content-Type: multipart/mixed; boundary="b%d"\n\n--b%d\n' % (i, i) for i in range(3000)
    )
    parsed = parse_message(deep)
    check_invariants(parsed, deep)
    assert parsed.notes

    many = (
        b'Content-Type: multipart/mixed; boundary="b"\n\n'
        + (b"--b\nContent-Type: image/gif\n\nGIF89a\n" * 1500)
        + b"--b--\n"
    )
    parsed = parse_message(many)
    check_invariants(parsed, many)
    assert len(parsed.attachments) == 1000
    assert any("more than 1000 parts" in n for n in parsed.notes)


def test_binary_junk_gives_a_record() -> None:
    """Random binary bytes come back as a record, with notes rather than an exception."""
    junk = bytes(range(256)) * 64
    parsed = parse_message(junk)
    check_invariants(parsed, junk)


def test_forwarded_digest_and_uuencoded_parts() -> None:
    """message/rfc822 and uuencoded attachments are attachments with decoded sizes."""
    raw = message(
        'Content-Type: multipart/mixed; boundary="m"',
        "--m\nContent-Type: text/plain\n\nsee attached\n"
        "--m\nContent-Type: application/octet-stream; name=a.bin\n"
        "Content-Transfer-Encoding: x-uuencode\n\nbegin 644 a.bin\n#86)C\n`\nend\n"
        "--m--\n",
    )
    parsed = parse_message(raw)
    assert parsed.text_body == "see attached"
    assert parsed.attachments == [
        Attachment("a.bin", "application/octet-stream", 3, None, None, "2")
    ]


def test_filenames_are_cleaned() -> None:
    """Path components and control characters are removed from attachment filenames."""
    raw = message(
        'Content-Type: multipart/mixed; boundary="m"',
        "--m\nContent-Type: text/plain\n\nx\n--m\nContent-Type: application/x-foo\n"
        'Content-Disposition: attachment; filename="../../etc/pass\x01wd"\n\ndata\n'
        '--m\nContent-Type: application/pdf; name="C:\\\\Users\\\\me\\\\doc.pdf"\n\n%PDF\n--m--\n',
    )
    first, second = parse_message(raw).attachments
    assert first.filename == "pass wd"
    assert second.filename == "doc.pdf"


def test_filename_parameters_in_every_common_encoding() -> None:
    """RFC 2231 (with continuations), encoded words and raw 8-bit filenames all decode."""
    parts = [
        b"Content-Disposition: attachment; filename*0*=utf-8''r%C3%A9; filename*1=sum;"
        b" filename*2*=%C3%A9.txt",
        b'Content-Disposition: attachment; filename="=?iso-8859-1?q?caf=E9.doc?="',
        b'Content-Disposition: attachment; filename="\xc3\xbcber.pdf"',
        b'Content-Disposition: attachment; filename="\xfcber.xls"',
        b'Content-Type: application/zip; name="archive.zip"',
    ]
    body = b"".join(b"--m\n" + p + b"\n\ndata\n" for p in parts) + b"--m--\n"
    raw = b'Content-Type: multipart/mixed; boundary="m"\n\n' + body
    names = [a.filename for a in parse_message(raw).attachments]
    assert names == ["résumé.txt", "café.doc", "über.pdf", "über.xls", "archive.zip"]
