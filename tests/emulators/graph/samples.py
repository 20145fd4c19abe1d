"""Raw MIME messages for tests of the Graph emulator and of mailroom's Graph client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime


def raw_message(
    number: int,
    *,
    subject: str | None = None,
    reply_to: str | None = None,
    sender: str = "Ann Sender <ann@example.org>",
    to: str = "user@example.com",
    body: str | None = None,
) -> bytes:
    """A small text message with Message-ID ``<n@example.org>``, dated ``number`` hours in.

    ``reply_to`` (a Message-ID) makes it a reply: ``In-Reply-To`` and ``References``.
    """
    message = EmailMessage()
    message["From"] = sender
    message["To"] = to
    message["Subject"] = subject if subject is not None else f"Message {number}"
    message["Message-ID"] = f"<{number}@example.org>"
    moment = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=number)
    message["Date"] = format_datetime(moment)
    if reply_to:
        message["In-Reply-To"] = reply_to
        message["References"] = reply_to
    message.set_content(body if body is not None else f"Body of message {number}.\n")
    return message.as_bytes()


def received_at(number: int) -> datetime:
    """The delivery time matching :func:`raw_message`'s date (for newest-first order)."""
    return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=number, minutes=1)
