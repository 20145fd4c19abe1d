"""How Gmail shows a message: the ``payload`` tree, the snippet and base64url.

``payload`` mirrors the MIME structure: the root part has ``partId`` ""; its
children "0", "1", ..., theirs "1.0", ... Each part has ``mimeType``,
``filename``, ``headers`` (name/value in the order of the message) and
``body`` ``{size, data?, attachmentId?}``. A leaf with a file name is an
attachment: its body carries an ``attachmentId`` instead of ``data`` and is
fetched with messages.attachments.get. ``data`` is the decoded content in
base64url.
"""

from __future__ import annotations

import base64
import email
import email.message
import email.policy
import html
import re
from typing import Any

SNIPPET_LENGTH = 200


def b64url(data: bytes) -> str:
    """URL-safe base64 with padding, as Gmail sends ``raw`` and ``body.data``."""
    return base64.urlsafe_b64encode(data).decode("ascii")


def from_b64url(text: str) -> bytes:
    """Decode URL-safe base64 with or without padding (clients send either)."""
    cleaned = text.strip().replace("+", "-").replace("/", "_")
    return base64.urlsafe_b64decode(cleaned + "=" * (-len(cleaned) % 4))


def parse(raw: bytes) -> email.message.Message:
    """The message parsed without rewriting headers (compat32 keeps raw values)."""
    return email.message_from_bytes(raw, policy=email.policy.compat32)


def headers_of(part: email.message.Message) -> list[dict[str, str]]:
    """A part's headers as Gmail lists them."""
    return [{"name": name, "value": str(value)} for name, value in part.items()]


def header_fields(raw: bytes) -> dict[str, str]:
    """The header block as {lowercase name: first value}, folded lines unfolded.

    A plain scan: the stdlib parser is far slower, and seeding 20,000 messages
    reads these for each one.
    """
    match = re.search(rb"\r?\n\r?\n", raw)
    block = (raw[: match.start()] if match else raw).decode("utf-8", errors="replace")
    fields: dict[str, str] = {}
    name: str | None = None
    for line in block.splitlines():
        if line[:1] in (" ", "\t"):
            if name is not None:
                fields[name] += " " + line.strip()
            continue
        key, sep, value = line.partition(":")
        if not sep:
            name = None
            continue
        name = key.strip().lower()
        if name in fields:
            name = None  # only the first occurrence counts; skip its folded lines too
            continue
        fields[name] = value.strip()
    return fields


def header(raw: bytes, name: str) -> str:
    """One header's value ('' when absent); reads only the header block."""
    return header_fields(raw).get(name.lower(), "")


def attachment_id(message_id: str, part_id: str) -> str:
    """A stable attachment id for one part of one message."""
    return "ANGjdJ" + b64url(f"{message_id}:{part_id}".encode()).rstrip("=")


def part_of_attachment(attachment: str) -> tuple[str, str] | None:
    """(message id, part id) of an attachment id, or None if it is not one of ours."""
    if not attachment.startswith("ANGjdJ"):
        return None
    try:
        decoded = from_b64url(attachment[6:]).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    message_id, sep, part_id = decoded.partition(":")
    return (message_id, part_id) if sep else None


def _leaf_bytes(part: email.message.Message) -> bytes:
    payload = part.get_payload(decode=True)
    return payload if isinstance(payload, bytes) else b""


def render_part(part: email.message.Message, part_id: str, message_id: str) -> dict[str, Any]:
    """One part (and its children) in Gmail's ``payload`` shape."""
    filename = part.get_filename() or ""
    rendered: dict[str, Any] = {
        "partId": part_id,
        "mimeType": part.get_content_type(),
        "filename": filename,
        "headers": headers_of(part),
    }
    if part.is_multipart():
        children = part.get_payload()
        assert isinstance(children, list)
        prefix = f"{part_id}." if part_id else ""
        rendered["body"] = {"size": 0}
        rendered["parts"] = [
            render_part(child, f"{prefix}{index}", message_id)
            for index, child in enumerate(children)
        ]
        return rendered
    data = _leaf_bytes(part)
    if filename:
        rendered["body"] = {"attachmentId": attachment_id(message_id, part_id), "size": len(data)}
    else:
        rendered["body"] = {"size": len(data), "data": b64url(data)} if data else {"size": 0}
    return rendered


def find_part(raw: bytes, part_id: str) -> bytes | None:
    """The decoded content of the part ``part_id`` (attachments.get), or None."""
    part: email.message.Message = parse(raw)
    if part_id:
        for step in part_id.split("."):
            children = part.get_payload() if part.is_multipart() else None
            if not isinstance(children, list) or not step.isdigit() or int(step) >= len(children):
                return None
            part = children[int(step)]
    return None if part.is_multipart() else _leaf_bytes(part)


def snippet(raw: bytes) -> str:
    """The first text of the message, whitespace folded, HTML-escaped like Gmail's."""
    message = parse(raw)
    text = ""
    for part in message.walk():
        if part.get_content_maintype() == "text" and not part.get_filename():
            charset = part.get_content_charset() or "utf-8"
            body = _leaf_bytes(part).decode(charset, errors="replace")
            if part.get_content_subtype() == "html":
                body = re.sub(r"<[^>]+>", " ", body)
            text = body
            break
    folded = " ".join(text.split())
    return html.escape(folded[:SNIPPET_LENGTH], quote=True).replace("&#x27;", "&#39;")
