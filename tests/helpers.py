"""Small test helpers that go through the public services."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import select

from mailroom.ingest import BatchResult, IncomingMessage, store_batch
from mailroom.labels.resolver import ensure_system_labels
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.store.engine import Store
from mailroom.store.models import Message

if TYPE_CHECKING:
    from huey import Huey


def make_account(store: Store, owner: str = "me", name: str = "test") -> tuple[int, int, int]:
    """Create (user, account) and the system labels; returns (user_id, account_id, inbox_id)."""
    with store.session() as session:
        user = get_or_create_user(session, owner)
        account = get_or_create_account(session, user, name, "local")
        roles = ensure_system_labels(session, user.id)
        return user.id, account.id, roles["inbox"]


def ingest(
    store: Store,
    account: tuple[int, int, int],
    raws: Sequence[tuple[str, bytes]],
) -> BatchResult:
    """Store (provider id, raw) pairs as one batch in the inbox."""
    user_id, account_id, inbox = account
    with store.session() as session:
        items = [IncomingMessage(pid, raw, label_ids=[inbox]) for pid, raw in raws]
        return store_batch(session, account_id, user_id, items)


def thread_of(store: Store, message_id_header: str) -> int | None:
    """The thread id of the message with this Message-ID."""
    with store.session() as session:
        return session.scalar(
            select(Message.thread_id).where(Message.message_id_header == message_id_header)
        )


def thread_of_provider(store: Store, provider_id: str) -> int | None:
    """The thread id of the message with this provider id (sealed mail's Message-ID is hashed)."""
    with store.session() as session:
        return session.scalar(select(Message.thread_id).where(Message.provider_id == provider_id))


def write_maildir(root: Path, messages: dict[str, bytes], folder: str = "") -> Path:
    """Write messages into a Maildir (optionally a Maildir++ sub-folder)."""
    base = root / folder if folder else root
    for sub in ("cur", "new", "tmp"):
        (base / sub).mkdir(parents=True, exist_ok=True)
        (root / sub).mkdir(parents=True, exist_ok=True)
    for name, raw in messages.items():
        (base / "cur" / f"{name}:2,S").write_bytes(raw)
    return root


def drain(queue: Huey) -> int:
    """Run queued jobs one by one until the queue is empty; returns how many ran."""
    ran = 0
    while (task := queue.dequeue()) is not None:
        queue.execute(task)
        ran += 1
    return ran
