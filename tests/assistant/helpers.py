"""Owners, messages and timelines for the assistant's tests."""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import select

from mailroom.assistant.config import set_owner
from mailroom.ingest import IncomingMessage
from mailroom.labels.resolver import ensure_system_labels
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.store.engine import Store
from mailroom.store.models import Account, Message, Thread, utcnow
from tests.factories import make_message

OWNER = "sam@example.org"


@dataclass(frozen=True)
class Owner:
    """A user with one account (live or importing) and the assistant on or off."""

    user_id: int
    account_id: int
    inbox: int


def make_owner(store: Store, *, live: bool = True, assistant: bool = True) -> Owner:
    """A user whose account finished importing (``live``) and who switched the assistant on."""
    with store.session() as session:
        user = get_or_create_user(session, "sam")
        account = get_or_create_account(session, user, "main", "local", {"email": OWNER})
        inbox = ensure_system_labels(session, user.id)["inbox"]
        if live:
            session.get(Account, account.id).import_finished_at = utcnow()  # type: ignore[union-attr]
        set_owner(session, user.id, assistant)
        return Owner(user.id, account.id, inbox)


def incoming(owner: Owner, key: str, subject: str, **headers: str) -> IncomingMessage:
    """A new inbox message from a stranger, arriving now (the cascade says Primary)."""
    raw = make_message(
        f"{key}@example.com",
        subject=subject,
        sender=f"Shop {key} <{key}@shop.example.com>",
        to=OWNER,
        body=f"Hello, {subject}.\n",
        headers=headers,
    )
    return IncomingMessage(key, raw, label_ids=[owner.inbox], received_at=utcnow())


def thread_tabs(store: Store, provider_ids: list[str]) -> dict[str, str | None]:
    """provider id -> the tab of its message's thread."""
    with store.session() as session:
        rows = session.execute(
            select(Message.provider_id, Thread.category)
            .join(Thread, Thread.id == Message.thread_id)
            .where(Message.provider_id.in_(provider_ids))
        )
        return {provider_id: category for provider_id, category in rows}


class Timeline:
    """The tabs each watched message's thread had, with the time each began."""

    def __init__(self, store: Store, keys: list[str]) -> None:
        self.store = store
        self.keys = keys
        self.start = time.monotonic()
        self.seen: dict[str, list[tuple[float, str | None]]] = {key: [] for key in keys}

    def watch(self, seconds: float, step: float = 0.05) -> None:
        """Poll the threads' tabs for ``seconds`` from the start, noting every change."""
        while time.monotonic() - self.start < seconds:
            now = time.monotonic() - self.start
            for key, tab in thread_tabs(self.store, self.keys).items():
                if not self.seen[key] or self.seen[key][-1][1] != tab:
                    self.seen[key].append((now, tab))
            time.sleep(step)

    def tabs(self, key: str) -> list[str | None]:
        """The tabs of one thread, in order."""
        return [tab for _, tab in self.seen[key]]

    def since(self, key: str, tab: str) -> float:
        """When the thread first had ``tab``."""
        return next(at for at, seen in self.seen[key] if seen == tab)
