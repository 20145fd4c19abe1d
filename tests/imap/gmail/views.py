"""Both sides of a Gmail-over-IMAP account, read independently, for comparing them.

``gmail_view`` reads the emulator's model (never through mailroom): per Message-ID
the X-GM-MSGID, X-GM-THRID, where it is (all/spam/trash), its labels as mailroom
should show them, and whether it is read and starred. ``mailroom_view`` reads
mailroom's tables the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from mailroom.store.engine import Store
from mailroom.store.models import Label, Message, MessageLabel, MessageLocation
from tests.emulators.gmail_imap import GmailModel

# What each Gmail system label is called in mailroom (Important has no label).
SYSTEM_NAMES = {"\\Inbox": "Inbox", "\\Sent": "Sent", "\\Draft": "Drafts", "\\Starred": "Starred"}
PLACES = {"trash": "Trash", "spam": "Spam"}


@dataclass(frozen=True)
class Seen:
    """One message as a side shows it."""

    provider_id: str
    thread: str
    labels: frozenset[str]
    seen: bool


def _expected_labels(labels: set[str], place: str) -> frozenset[str]:
    names = {SYSTEM_NAMES[x] for x in labels if x in SYSTEM_NAMES}
    names |= {x for x in labels if not x.startswith("\\")}
    if place in PLACES:
        names.add(PLACES[place])
    elif not names - {"Starred"}:
        names.add("Archive")  # in All Mail with no other label: archived
    return frozenset(names)


def gmail_view(model: GmailModel) -> dict[str, Seen]:
    """Message-ID -> what mailroom should show for it, from the emulator's state."""
    found: dict[str, Seen] = {}
    for message in model.messages():
        assert message.message_id is not None
        found[message.message_id] = Seen(
            provider_id=f"gm:{message.msgid:x}",
            thread=f"{message.thrid:x}",
            labels=_expected_labels(message.labels, message.place),
            seen="\\Seen" in message.flags,
        )
    return found


def mailroom_view(store: Store, account_id: int) -> dict[str, Seen]:
    """Message-ID -> what mailroom stores for it."""
    with store.session() as session:
        rows = session.execute(
            select(
                Message.id,
                Message.message_id_header,
                Message.provider_id,
                Message.provider_thread_id,
                Message.seen_at,
            ).where(Message.account_id == account_id)
        ).all()
        labels: dict[int, set[str]] = {}
        for message_id, path in session.execute(
            select(MessageLabel.message_id, Label.path).join(
                Label, Label.id == MessageLabel.label_id
            )
        ):
            labels.setdefault(message_id, set()).add(path)
    found: dict[str, Seen] = {}
    for row in rows:
        key = str(row.message_id_header).strip("<>")
        assert key not in found, f"{key} is stored twice"
        found[key] = Seen(
            provider_id=row.provider_id,
            thread=row.provider_thread_id or "",
            labels=frozenset(labels.get(row.id, set())),
            seen=row.seen_at is not None,
        )
    return found


def location_counts(store: Store, account_id: int) -> dict[int, int]:
    """Message id -> how many locations it has."""
    with store.session() as session:
        counts: dict[int, int] = {}
        for (message_id,) in session.execute(
            select(MessageLocation.message_id)
            .join(Message, Message.id == MessageLocation.message_id)
            .where(Message.account_id == account_id)
        ):
            counts[message_id] = counts.get(message_id, 0) + 1
        return counts
