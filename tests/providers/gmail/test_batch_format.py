"""Reading a batch answer: pairing by Content-ID in any order, both id styles."""

from __future__ import annotations

import json

from mailroom.providers.gmail.batch import BatchCall, build_batch, read_batch
from mailroom.providers.gmail.errors import retry_after_of


def _answer(parts: list[tuple[str, int, dict[str, str]]]) -> tuple[str, bytes]:
    chunks = []
    for content_id, status, body in parts:
        data = json.dumps(body)
        chunks.append(
            "--xyz\r\nContent-Type: application/http\r\n"
            f"Content-ID: <{content_id}>\r\n\r\nHTTP/1.1 {status} X\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n{data}\r\n"
        )
    return "multipart/mixed; boundary=xyz", ("".join(chunks) + "--xyz--\r\n").encode()


def test_answers_are_paired_by_content_id_not_position() -> None:
    """Parts answered out of order still map to their calls; Google's uuid style too."""
    content_type, body = _answer(
        [
            ("response-item-2", 404, {"e": "2"}),
            ("response-item-0", 200, {"id": "zero"}),
            ("response-4f2a + 1", 429, {"e": "1"}),
        ]
    )
    replies = {reply.index: reply for reply in read_batch(content_type, body)}
    assert sorted(replies) == [0, 1, 2]
    assert replies[0].status == 200 and json.loads(replies[0].body) == {"id": "zero"}
    assert replies[1].status == 429 and replies[2].status == 404


def test_built_batch_numbers_its_calls() -> None:
    """Each call is one application/http part with Content-ID <item-N> and its request line."""
    content_type, body = build_batch([BatchCall("GET", "/a?x=1"), BatchCall("GET", "/b")])
    boundary = content_type.split("boundary=")[1]
    text = body.decode()
    assert text.count(f"--{boundary}\r\nContent-Type: application/http") == 2
    assert "Content-ID: <item-0>\r\n\r\nGET /a?x=1 HTTP/1.1" in text
    assert "Content-ID: <item-1>\r\n\r\nGET /b HTTP/1.1" in text
    assert text.endswith(f"--{boundary}--\r\n")


def test_retry_after_forms() -> None:
    """Retry-After as seconds or an HTTP date, or the time named in Google's message."""
    assert retry_after_of({"retry-after": "2.5"}) == 2.5
    assert retry_after_of({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # past
    assert retry_after_of({}, "User-rate limit exceeded.  Retry after 2000-01-01T00:00:00Z") == 0.0
    assert retry_after_of({}, "Too many concurrent requests for user") is None
