"""The multipart/mixed batch format, client side: build a batch, read its answer.

A batch request is ``multipart/mixed`` with one ``application/http`` part per
call, each carrying ``Content-ID: <item-N>`` (N from 0) and a whole HTTP
request line. The answer is ``multipart/mixed`` again: per call a part whose
``Content-ID`` is ``<response-item-N>`` and whose content is a whole HTTP
response (status line, headers, body). Google may answer the calls in any
order, so the Content-ID is the only thing that pairs an answer with its call.
"""

from __future__ import annotations

import email.message
import email.parser
import email.policy
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["BatchCall", "BatchReply", "build_batch", "read_batch"]

_RESPONSE_PREFIX = "response-"


@dataclass(frozen=True, slots=True)
class BatchCall:
    """One call to put in a batch: verb and path with query (``/gmail/v1/...``)."""

    verb: str
    target: str


@dataclass(frozen=True, slots=True)
class BatchReply:
    """The answer to the call with ``index`` (its position in the batch)."""

    index: int
    status: int
    headers: dict[str, str]
    body: bytes


def build_batch(calls: Sequence[BatchCall]) -> tuple[str, bytes]:
    """(Content-Type, body) of a batch request holding ``calls``."""
    boundary = "mailroom_batch_" + secrets.token_hex(12)
    lines: list[str] = []
    for index, call in enumerate(calls):
        lines += [
            f"--{boundary}",
            "Content-Type: application/http",
            f"Content-ID: <item-{index}>",
            "",
            f"{call.verb} {call.target} HTTP/1.1",
            "",
            "",
        ]
    lines.append(f"--{boundary}--")
    return f"multipart/mixed; boundary={boundary}", "\r\n".join(lines).encode("ascii") + b"\r\n"


def _index(content_id: str) -> int | None:
    value = content_id.strip().strip("<>")
    if value.startswith(_RESPONSE_PREFIX):
        value = value[len(_RESPONSE_PREFIX) :]
    # "item-N" as we send it; "uuid + N" as Google's own client library sends it
    for separator in ("item-", " + "):
        if separator in value:
            value = value.rsplit(separator, 1)[1]
            break
    return int(value) if value.strip().isdigit() else None


def _http_response(data: bytes) -> tuple[int, dict[str, str], bytes] | None:
    head, _, body = data.replace(b"\r\n", b"\n").partition(b"\n\n")
    lines = head.decode("latin-1").strip("\n").split("\n")
    status_line = lines[0].split() if lines else []
    if len(status_line) < 2 or not status_line[1].isdigit():
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return int(status_line[1]), headers, body.strip(b"\n")


def read_batch(content_type: str, body: bytes) -> list[BatchReply]:
    """The answers in a batch response; parts that cannot be read are left out."""
    parser = email.parser.BytesParser(policy=email.policy.compat32)
    head = b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n"
    container = parser.parsebytes(head + body)
    replies: list[BatchReply] = []
    parts = container.get_payload() if container.is_multipart() else []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, email.message.Message):
            continue
        index = _index(str(part.get("Content-ID", "")))
        content = part.get_payload(decode=True)
        if index is None or not isinstance(content, bytes):
            continue
        parsed = _http_response(content)
        if parsed is not None:
            replies.append(BatchReply(index, *parsed))
    return replies
