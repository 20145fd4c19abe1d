"""The owner moves conversations to another tab: the move, and the correction it records.

A move pins each thread to the chosen tab (``threads.category_pinned``, so
recomputations leave it there and ``explain`` says "pinned by you") and
records a *correction*: the tab the owner wants for mail from each sender of
the moved threads, in ``users.settings["tab_corrections"]`` (sender address ->
tab, newest last, at most :data:`MAX_CORRECTIONS`). ``categories.learned``
turns it into the cascade's ``correction`` stage, above the rules.

:func:`move_to_tab` returns what it replaced, and :func:`restore_tabs` puts
exactly that back (the web page's undo).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from mailroom.categories.learned import corrections_of
from mailroom.categories.tabs import CATEGORIES
from mailroom.crypto.message_fields import open_rows
from mailroom.errors import NotFoundError
from mailroom.store import changelog
from mailroom.store.models import Message, Thread, User

MAX_CORRECTIONS = 5000


@dataclass(frozen=True, slots=True)
class TabMove:
    """What a move replaced: each thread's (tab, pinned), each sender's earlier correction."""

    threads: dict[int, tuple[str | None, bool]]
    corrections: dict[str, str | None]

    def as_data(self) -> dict[str, Any]:
        """A JSON-ready form (for an undo token)."""
        return {
            "threads": {str(k): list(v) for k, v in self.threads.items()},
            "corrections": self.corrections,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> TabMove:
        """The move :meth:`as_data` wrote; ValueError if it is not one."""
        threads = {
            int(k): (None if v[0] is None else str(v[0]), bool(v[1]))
            for k, v in dict(data["threads"]).items()
        }
        corrections = {
            str(k): None if v is None else str(v) for k, v in dict(data["corrections"]).items()
        }
        return cls(threads, corrections)


def move_to_tab(session: Session, user_id: int, thread_ids: Iterable[int], tab: str) -> TabMove:
    """Pin the user's threads to ``tab`` and record the correction for their senders."""
    if tab not in CATEGORIES:
        raise NotFoundError(f"There is no tab {tab!r}; the tabs are {', '.join(CATEGORIES)}.")
    wanted = sorted(set(thread_ids))
    rows = session.execute(
        select(Thread.id, Thread.category, Thread.category_pinned).where(
            Thread.id.in_(wanted), Thread.user_id == user_id
        )
    ).all()
    if len(rows) != len(wanted):
        missing = set(wanted) - {row.id for row in rows}
        raise NotFoundError(f"There is no thread {min(missing)} for this user.")
    sent_by = session.execute(
        select(Message.id, Message.user_id, Message.sealed, Message.from_email).where(
            Message.thread_id.in_(wanted), Message.from_email.is_not(None)
        )
    )
    senders = sorted(
        {
            str(row["from_email"]).lower()
            for row in open_rows(session, sent_by, ["from_email"])  # a sealed sender opened
            if row["from_email"]
        }
    )
    user = session.get(User, user_id)
    assert user is not None
    settings = dict(user.settings or {})
    known = corrections_of(settings)
    before = {sender: known.get(sender) for sender in senders}
    for sender in senders:
        known.pop(sender, None)
        known[sender] = tab
    _save(user, settings, known)
    session.execute(
        update(Thread).where(Thread.id.in_(wanted)).values(category=tab, category_pinned=True)
    )
    changelog.record(session, user_id, "Thread", wanted, "updated")
    return TabMove({row.id: (row.category, bool(row.category_pinned)) for row in rows}, before)


def restore_tabs(session: Session, user_id: int, move: TabMove) -> None:
    """Put back what :func:`move_to_tab` replaced (threads that are gone are skipped)."""
    ids = sorted(
        session.scalars(
            select(Thread.id).where(Thread.id.in_(move.threads), Thread.user_id == user_id)
        )
    )
    for thread_id in ids:
        category, pinned = move.threads[thread_id]
        session.execute(
            update(Thread)
            .where(Thread.id == thread_id)
            .values(category=category, category_pinned=pinned)
        )
    changelog.record(session, user_id, "Thread", ids, "updated")
    user = session.get(User, user_id)
    assert user is not None
    settings = dict(user.settings or {})
    known = corrections_of(settings)
    for sender, tab in move.corrections.items():
        if tab is None:
            known.pop(sender, None)
        else:
            known[sender] = tab
    _save(user, settings, known)


def _save(user: User, settings: dict[str, Any], known: dict[str, str]) -> None:
    if known:
        settings["tab_corrections"] = dict(list(known.items())[-MAX_CORRECTIONS:])
    else:
        settings.pop("tab_corrections", None)
    user.settings = settings
