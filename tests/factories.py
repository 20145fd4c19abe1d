"""Building raw RFC 5322 messages for tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime

BASE_TIME = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def make_message(
    message_id: str,
    *,
    subject: str = "Hello",
    sender: str = "Alice <alice@example.org>",
    to: str = "Bob <bob@example.net>",
    in_reply_to: str | None = None,
    references: list[str] | None = None,
    body: str = "Hi there.\n",
    html: str | None = None,
    minutes: int = 0,
    headers: dict[str, str] | None = None,
) -> bytes:
    """A well-formed message with the given threading headers."""
    message = EmailMessage()
    message["Message-ID"] = f"<{message_id}>"
    message["From"] = sender
    message["To"] = to
    message["Subject"] = subject
    message["Date"] = format_datetime(BASE_TIME + timedelta(minutes=minutes))
    if in_reply_to:
        message["In-Reply-To"] = f"<{in_reply_to}>"
    if references:
        message["References"] = " ".join(f"<{ref}>" for ref in references)
    for name, value in (headers or {}).items():
        message[name] = value
    message.set_content(body)
    if html is not None:
        message.add_alternative(html, subtype="html")
    return message.as_bytes()
