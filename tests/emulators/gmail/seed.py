"""Messages to fill an emulated mailbox with: plain, threaded, with attachments."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from email.utils import format_datetime

from tests.emulators.gmail.emulator import GmailEmulator

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def make_message(
    subject: str,
    body: str = "Hello there.",
    *,
    sender: str = "alice@example.org",
    to: str = "owner@example.com",
    message_id: str | None = None,
    in_reply_to: str | None = None,
    when: datetime = START,
    attachment: tuple[str, bytes] | None = None,
    html: str | None = None,
) -> bytes:
    """An RFC 5322 message as bytes."""
    message = EmailMessage()
    message["From"] = sender
    message["To"] = to
    message["Subject"] = subject
    message["Date"] = format_datetime(when)
    if message_id:
        message["Message-ID"] = message_id
    if in_reply_to:
        message["In-Reply-To"] = in_reply_to
        message["References"] = in_reply_to
    message.set_content(body)
    if html is not None:
        message.add_alternative(html, subtype="html")
    if attachment is not None:
        name, data = attachment
        message.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
    return message.as_bytes()


def epoch_ms(when: datetime) -> int:
    """Epoch milliseconds (Gmail's internalDate)."""
    return int(when.timestamp() * 1000)


def seed_mailbox(gmail: GmailEmulator, count: int = 20) -> list[str]:
    """``count`` messages over ``count`` hours: every third a reply, some with a user label,
    categories and an attachment. Returns the ids, oldest first."""
    work = gmail.create_label("Work")
    invoices = gmail.create_label("Work/Invoices")
    categories = ["CATEGORY_PERSONAL", "CATEGORY_UPDATES", "CATEGORY_PROMOTIONS"]
    ids: list[str] = []
    for number in range(count):
        when = START + timedelta(hours=number)
        root = number - number % 3
        replying = number % 3 != 0
        subject = f"Topic {root}"
        raw = make_message(
            f"Re: {subject}" if replying else subject,
            f"Message number {number}.",
            message_id=f"<m{number}@example.org>",
            in_reply_to=f"<m{number - 1}@example.org>" if replying else None,
            when=when,
            attachment=("report.bin", bytes(range(64))) if number % 7 == 6 else None,
        )
        labels = ["INBOX", categories[number % len(categories)]]
        if number % 2:
            labels.append("UNREAD")
        if number % 5 == 4:
            labels.append(work if number % 10 == 4 else invoices)
        ids.append(gmail.add_message(raw, labels, internal_date=epoch_ms(when)))
    return ids
