"""What Graph shows of a message, derived from its raw MIME.

Graph parses the RFC 822 bytes once at delivery; the emulator does the same with
the standard library (the fast ``compat32`` parser, headers decoded from RFC 2047):
addresses become ``{"emailAddress": {"name", "address"}}``, dates become ISO 8601
UTC, the HTML part (else the plain one) becomes ``body`` and its first 255
characters ``bodyPreview``. The conversation key is what groups a conversation:
the first message id of ``References`` (else ``In-Reply-To``, else the message's
own id), so a reply lands in its parent's conversation as on Exchange.
"""

from __future__ import annotations

import email
import email.header
import email.policy
import email.utils
import re
from datetime import UTC, datetime
from email.message import Message
from typing import Any

PREVIEW_LENGTH = 255


def _text(value: Any) -> str:
    """A header value decoded from RFC 2047 words ('' if absent or undecodable)."""
    if value is None:
        return ""
    try:
        return str(email.header.make_header(email.header.decode_header(str(value))))
    except (LookupError, ValueError, UnicodeError):
        return str(value)


def recipients(value: Any) -> list[dict[str, Any]]:
    """A header's addresses in Graph's recipient shape."""
    if not value:
        return []
    return [
        {"emailAddress": {"name": _text(name) or address, "address": address}}
        for name, address in email.utils.getaddresses([str(value)])
        if address
    ]


def iso(moment: datetime) -> str:
    """Graph's date-time form: UTC with a ``Z``, whole seconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _date(message: Message) -> datetime | None:
    value = message.get("Date")
    if not value:
        return None
    try:
        moment = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _decoded(part: Message) -> str:
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return ""
    return payload.decode(part.get_content_charset() or "utf-8", "replace")


def _body(message: Message) -> tuple[str, str]:
    found: dict[str, str] = {}
    for part in message.walk():
        kind = part.get_content_type()
        wanted = kind in ("text/html", "text/plain") and kind not in found
        if wanted and part.get_content_disposition() != "attachment":
            found[kind] = _decoded(part)
    if "text/html" in found:
        return "html", found["text/html"]
    return "text", found.get("text/plain", "")


def _preview(kind: str, content: str) -> str:
    if kind == "html":
        content = re.sub(r"<[^>]+>", " ", content)
    return " ".join(content.split())[:PREVIEW_LENGTH]


def _conversation_key(message: Message) -> str:
    references = str(message.get("References") or "").split()
    if references:
        return references[0]
    in_reply_to = str(message.get("In-Reply-To") or "").split()
    if in_reply_to:
        return in_reply_to[0]
    return str(message.get("Message-ID") or "").strip()


def _importance(message: Message) -> str:
    value = str(message.get("Importance") or message.get("X-Priority") or "").lower()
    if value.startswith(("high", "1", "2")):
        return "high"
    if value.startswith(("low", "4", "5")):
        return "low"
    return "normal"


def properties(raw: bytes, received: datetime) -> tuple[dict[str, Any], str]:
    """The parsed properties of a message delivered at ``received``, and its conversation key."""
    message = email.message_from_bytes(raw, policy=email.policy.compat32)
    kind, content = _body(message)
    sent = _date(message) or received
    sender = recipients(message.get("Sender")) or recipients(message.get("From"))
    attachments = any(part.get_content_disposition() == "attachment" for part in message.walk())
    props = {
        "internetMessageId": str(message.get("Message-ID") or "").strip(),
        "subject": _text(message.get("Subject")),
        "from": (recipients(message.get("From")) or [None])[0],
        "sender": (sender or [None])[0],
        "toRecipients": recipients(message.get("To")),
        "ccRecipients": recipients(message.get("Cc")),
        "bccRecipients": recipients(message.get("Bcc")),
        "replyTo": recipients(message.get("Reply-To")),
        "sentDateTime": iso(sent),
        "receivedDateTime": iso(received),
        "body": {"contentType": kind, "content": content},
        "bodyPreview": _preview(kind, content),
        "hasAttachments": attachments,
        "importance": _importance(message),
        "internetMessageHeaders": [{"name": k, "value": _text(v)} for k, v in message.items()],
    }
    return props, _conversation_key(message)
