"""The multipart/mixed batch format of Google APIs (batch guide), server side.

A request body is ``multipart/mixed``; each part is ``Content-Type:
application/http`` with an optional ``Content-ID`` and holds one whole HTTP
request (request line, headers, blank line, body). The answer is
``multipart/mixed`` too: one ``application/http`` part per call, in the same
order, with ``Content-ID: <response-X>`` for a request part ``<X>`` (or
``<response-item-N>``, N from 1, for a part without one), holding the whole
HTTP response — so a 429 can sit inside a 200 batch.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from http import HTTPStatus

from tests.emulators.gmail.errors import invalid_argument

MAX_PARTS = 100


@dataclass
class InnerRequest:
    """One call inside a batch."""

    content_id: str
    verb: str
    target: str  # path and query
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


@dataclass
class InnerResponse:
    """The answer to one call inside a batch."""

    content_id: str
    status: int
    headers: dict[str, str]
    body: bytes


def boundary_of(content_type: str) -> str:
    """The boundary parameter of a multipart Content-Type (400 when missing)."""
    match = re.search(r'boundary\s*=\s*"?([^";]+)"?', content_type or "", re.IGNORECASE)
    if not content_type.lower().startswith("multipart/") or match is None:
        raise invalid_argument("The batch request must be multipart/mixed with a boundary")
    return match.group(1).strip()


def _split_head(block: bytes) -> tuple[list[str], bytes]:
    for separator in (b"\r\n\r\n", b"\n\n"):
        head, found, rest = block.partition(separator)
        if found:
            return head.decode("latin-1").splitlines(), rest
    return block.decode("latin-1").splitlines(), b""


def _headers(lines: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return headers


def parse_batch(body: bytes, content_type: str) -> list[InnerRequest]:
    """The calls of a batch request body (400 for a malformed one or more than 100)."""
    delimiter = b"--" + boundary_of(content_type).encode("latin-1")
    chunks = body.split(delimiter)[1:]
    requests: list[InnerRequest] = []
    for chunk in chunks:
        if chunk.startswith(b"--"):
            break  # the closing delimiter
        part = chunk.lstrip(b"\r\n")
        if not part.strip():
            continue
        part_lines, inner = _split_head(part)
        part_headers = _headers(part_lines)
        request_lines, inner_body = _split_head(inner.lstrip(b"\r\n"))
        if not request_lines:
            raise invalid_argument("A batch part holds no HTTP request")
        pieces = request_lines[0].split()
        if len(pieces) < 2:
            raise invalid_argument("A batch part's request line is malformed")
        content_id = part_headers.get("content-id", "").strip()
        if content_id.startswith("<") and content_id.endswith(">"):
            content_id = content_id[1:-1]
        requests.append(
            InnerRequest(
                content_id or f"item-{len(requests) + 1}",
                pieces[0].upper(),
                pieces[1],
                _headers(request_lines[1:]),
                inner_body.rstrip(b"\r\n"),
            )
        )
    if not requests:
        raise invalid_argument("The batch request holds no parts")
    if len(requests) > MAX_PARTS:
        raise invalid_argument(f"Too many requests in batch: at most {MAX_PARTS}")
    return requests


def render_batch(responses: list[InnerResponse]) -> tuple[str, bytes]:
    """(Content-Type, body) of the batch answer."""
    boundary = "batch_" + secrets.token_urlsafe(12)
    out: list[bytes] = []
    for response in responses:
        reason = HTTPStatus(response.status).phrase
        inner = [f"HTTP/1.1 {response.status} {reason}"]
        inner += [f"{name}: {value}" for name, value in response.headers.items()]
        inner.append(f"Content-Length: {len(response.body)}")
        out.append(
            (
                f"--{boundary}\r\nContent-Type: application/http\r\n"
                f"Content-ID: <response-{response.content_id}>\r\n\r\n"
                + "\r\n".join(inner)
                + "\r\n\r\n"
            ).encode("latin-1")
            + response.body
            + b"\r\n"
        )
    out.append(f"--{boundary}--\r\n".encode("latin-1"))
    return f"multipart/mixed; boundary={boundary}", b"".join(out)
