"""What Graph shows of a message, derived from its raw MIME.

Graph parses the RFC 822 bytes once at delivery; the emulator does the same with
the standard library: addresses become ``{"emailAddress": {"name", "address"}}``,
dates become ISO 8601 UTC, the first text part becomes ``body`` and its first 255
characters ``bodyPreview``. ``conversation_key`` is what groups a conversation:
the first message id of ``References`` (else ``In-Reply-To``, else the message's
own id), so a reply lands in its parent's conversation as on Exchange.
"""

from __future__ import annotations

import email
import email.policy
import email.utils
import re
from datetime import UTC, datetime
from email.message import EmailMessage
from typing import Any

PREVIEW_LENGTH = 255


def parse(raw: bytes) -> EmailMessage:
    """The message parsed with the modern policy."""
    message = email.message_from_bytes(raw, policy=email.policy.default)
    assert isinstance(message, EmailMessage)
    return message


def recipients(value: str | None) -> list[dict[str, Any]]:
    """A header's addresses in Graph's recipient shape."""
    if not value:
        return []
    return [
        {"emailAddress": {"name": name or address, "address": address}}
        for name, address in email.utils.getaddresses([str(value)])
        if address
    ]


def iso(moment: datetime) -> str:
    """Graph's date-time form: UTC with a ``Z``, whole seconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def header_date(message: EmailMessage) -> datetime | None:
    """The ``Date`` header as an aware date-time, if it parses."""
    value = message.get("Date")
    if not value:
        return None
    try:
        moment = email.utils.parsedate_to_datetime(str(value))
    except (TypeError, ValueError):
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _text_body(message: EmailMessage) -> tuple[str, str]:
    part = message.get_body(preferencelist=("html", "plain"))
    if part is None:
        return "text", ""
    try:
        content = part.get_content()
    except (LookupError, KeyError):
        content = ""
    kind = "html" if part.get_content_subtype() == "html" else "text"
    return kind, content if isinstance(content, str) else ""


def _preview(kind: str, content: str) -> str:
    if kind == "html":
        content = re.sub(r"<[^>]+>", " ", content)
    return " ".join(content.split())[:PREVIEW_LENGTH]


def conversation_key(message: EmailMessage) -> str:
    """The message id that names this message's conversation."""
    references = str(message.get("References") or "").split()
    if references:
        return references[0]
    in_reply_to = str(message.get("In-Reply-To") or "").strip()
    if in_reply_to:
        return in_reply_to.split()[0]
    return str(message.get("Message-ID") or "").strip()


def properties(raw: bytes, received: datetime) -> dict[str, Any]:
    """The parsed properties of a message delivered at ``received``."""
    message = parse(raw)
    kind, content = _text_body(message)
    sent = header_date(message) or received
    sender = recipients(message.get("Sender")) or recipients(message.get("From"))
    return {
        "internetMessageId": str(message.get("Message-ID") or "").strip(),
        "subject": str(message.get("Subject") or ""),
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
        "hasAttachments": any(True for _ in message.iter_attachments()),
        "importance": _importance(message),
        "internetMessageHeaders": [{"name": k, "value": str(v)} for k, v in message.items()],
    }


def _importance(message: EmailMessage) -> str:
    value = str(message.get("Importance") or message.get("X-Priority") or "").lower()
    if value.startswith(("high", "1", "2")):
        return "high"
    if value.startswith(("low", "4", "5")):
        return "low"
    return "normal"
