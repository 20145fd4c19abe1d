"""The web page's actions on whole threads, and their exact undo.

An action runs through the operations service (``labels.operations``; the
tab move through ``categories.corrections``), so the providers hear about
every change. Around it the labels and read state of the threads' messages
are read before and after, and the *difference* is the undo record: undoing
removes exactly the labels the action added and adds back exactly the ones it
removed (Archive given or taken by the location rule included), on exactly
the messages it changed, and turns back the read state of exactly the
messages whose read state it turned. A change someone made in between to
other labels or messages is left alone.

=========  ============================================================
archive    out of the Inbox             inbox     back to the Inbox
trash      into Trash                   restore   out of Trash, into the Inbox
spam       into Spam                    unspam    out of Spam, into the Inbox
star       star                         unstar    remove the star
read       mark every message read      unread    mark every message unread
snooze     until a time (``until``)     tab       move to an inbox tab (``tab``)
label      add a user label (``label``) unlabel   remove it
move       into a box or label (``target``: inbox, archive, spam, trash or
           ``label:<id>``), out of the Inbox and the label it was shown under
=========  ============================================================
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.categories.corrections import TabMove, move_to_tab, restore_tabs
from mailroom.errors import NotFoundError
from mailroom.labels.operations import Operations
from mailroom.store.models import Label, Message, MessageLabel, Thread, utcnow

SIMPLE = {
    "archive": ("archive", "Archived"),
    "inbox": ("move_to_inbox", "Moved to the Inbox"),
    "trash": ("trash", "Moved to Trash"),
    "restore": ("restore", "Restored from Trash"),
    "spam": ("spam", "Marked as spam"),
}
ACTIONS = frozenset(SIMPLE) | {
    "unspam",
    "star",
    "unstar",
    "read",
    "unread",
    "snooze",
    "tab",
    "label",
    "unlabel",
    "move",
}
MOVE_BOXES = ("inbox", "archive", "spam", "trash")


class ActionError(Exception):
    """An action that cannot be done as asked; the message is one plain sentence."""


@dataclass(frozen=True, slots=True)
class Ask:
    """One action on some of the user's threads, with what it needs."""

    action: str
    thread_ids: Sequence[int]
    label_id: int | None = None  # label / unlabel
    tab: str | None = None  # tab
    until: datetime | None = None  # snooze
    target: str | None = None  # move
    shown_under: int | None = None  # move: the user label the threads were listed under


@dataclass(frozen=True, slots=True)
class Done:
    """What an action did: a sentence for the page and the record that undoes it."""

    message: str
    record: dict[str, Any]


LabelSets = dict[int, frozenset[int]]


def _labels(session: Session, message_ids: Sequence[int]) -> LabelSets:
    found: dict[int, set[int]] = defaultdict(set)
    for mid, lid in session.execute(
        select(MessageLabel.message_id, MessageLabel.label_id).where(
            MessageLabel.message_id.in_(message_ids)
        )
    ):
        found[mid].add(lid)
    return {mid: frozenset(found.get(mid, ())) for mid in message_ids}


def _unread(session: Session, message_ids: Sequence[int]) -> set[int]:
    return set(
        session.scalars(
            select(Message.id).where(Message.id.in_(message_ids), Message.seen_at.is_(None))
        )
    )


def _conversations(count: int) -> str:
    return "1 conversation" if count == 1 else f"{count} conversations"


class WebActions:
    """The actions of one user inside the caller's session."""

    def __init__(
        self, session: Session, user_id: int, now: Callable[[], datetime] = utcnow
    ) -> None:
        self.session = session
        self.user_id = user_id
        self.now = now
        self.ops = Operations(session, user_id, now)

    def perform(self, ask: Ask) -> Done:
        """Do ``ask``; ActionError or NotFoundError in plain words when it cannot be done."""
        if ask.action not in ACTIONS:
            raise ActionError(f"There is no action {ask.action!r}.")
        threads = sorted(set(ask.thread_ids))
        if not threads:
            raise ActionError("Select at least one conversation first.")
        messages = self.ops.messages_of_threads(threads)
        before, unread = _labels(self.session, messages), _unread(self.session, messages)
        wake = self._wake_times(threads) if ask.action == "snooze" else {}
        what, tabs = self._run(ask, threads, messages)
        record: dict[str, Any] = {
            "labels": _label_diff(before, _labels(self.session, messages)),
            "read": _read_diff(unread, _unread(self.session, messages)),
        }
        if wake:
            record["wake"] = wake
        if tabs is not None:
            record["tabs"] = tabs.as_data()
        return Done(f"{what}: {_conversations(len(threads))}.", record)

    def _run(self, ask: Ask, threads: list[int], messages: list[int]) -> tuple[str, TabMove | None]:
        ops = self.ops
        action = ask.action
        if action in SIMPLE:
            method, what = SIMPLE[action]
            getattr(ops, method)(messages)
            return what, None
        if action == "unspam":
            ops.spam(messages, is_spam=False)
            return "Marked as not spam", None
        if action in ("star", "unstar"):
            ops.star(messages, starred=action == "star")
            return ("Starred" if action == "star" else "Star removed"), None
        if action in ("read", "unread"):
            ops.mark_read(messages, read=action == "read")
            return ("Marked as read" if action == "read" else "Marked as unread"), None
        if action == "snooze":
            if ask.until is None or ask.until <= self.now():
                raise ActionError("Choose a time in the future to snooze until.")
            ops.snooze(threads, ask.until)
            return "Snoozed", None
        if action == "tab":
            if ask.tab is None:
                raise ActionError("Choose the tab to move the conversations to.")
            move = move_to_tab(self.session, self.user_id, threads, ask.tab)
            return f"Moved to {ask.tab.capitalize()}", move
        if action in ("label", "unlabel"):
            label = self._user_label(ask.label_id)
            ops.label(messages, label.id, on=action == "label")
            verb = "Labelled" if action == "label" else "Label removed"
            return f"{verb} {label.path}", None
        return self._move(ask, messages), None

    def _move(self, ask: Ask, messages: list[int]) -> str:
        target = ask.target or ""
        if target in MOVE_BOXES:
            method = {"inbox": "move_to_inbox", "archive": "archive"}.get(target, target)
            getattr(self.ops, method)(messages)
            return f"Moved to {target.capitalize()}"
        if not target.startswith("label:") or not target[6:].isdigit():
            raise ActionError("Choose where to move the conversations.")
        label = self._user_label(int(target[6:]))
        remove = [self.ops.role("inbox"), self.ops.role("snoozed")]
        if ask.shown_under is not None and ask.shown_under != label.id:
            remove.append(self._user_label(ask.shown_under).id)
        self.ops.change_labels(messages, [label.id], remove, "move")
        return f"Moved to {label.path}"

    def _user_label(self, label_id: int | None) -> Label:
        label = self.session.get(Label, label_id) if label_id is not None else None
        if label is None or label.user_id != self.user_id or label.role is not None:
            raise ActionError("Choose one of your labels.")
        return label

    def _wake_times(self, threads: list[int]) -> dict[str, str | None]:
        return {
            str(tid): until.isoformat() if until else None
            for tid, until in self.session.execute(
                select(Thread.id, Thread.snoozed_until).where(Thread.id.in_(threads))
            )
        }

    def undo(self, record: dict[str, Any]) -> str:
        """Reverse what an action did (its :attr:`Done.record`); the sentence for the page.

        Messages and threads deleted since are skipped; a record that is not one,
        or that names another user's messages or labels, is an ActionError.
        """
        try:
            labels = [
                ([int(m) for m in ids], [int(a) for a in added], [int(r) for r in removed])
                for ids, added, removed in record.get("labels", [])
            ]
            read_ids, was_read = record.get("read") or ([], True)
            read_ids = [int(m) for m in read_ids]
            wake = {
                int(tid): datetime.fromisoformat(at) if at else None
                for tid, at in (record.get("wake") or {}).items()
            }
            tabs = TabMove.from_data(record["tabs"]) if "tabs" in record else None
        except (KeyError, TypeError, ValueError) as exc:
            raise ActionError("This undo has expired; nothing was changed.") from exc
        self._check_labels({lid for _, added, removed in labels for lid in (*added, *removed)})
        try:
            for ids, added, removed in labels:
                present = self._present(ids)
                if present:
                    self.ops.set_labels(present, before=added, after=removed)
            present = self._present(read_ids)
            if present:
                self.ops.mark_read(present, read=not bool(was_read))
            live = [tid for tid in wake if self.session.get(Thread, tid) is not None]
            for tid in live:
                self.ops.set_wake_time([tid], wake[tid])
            if tabs is not None:
                restore_tabs(self.session, self.user_id, tabs)
        except NotFoundError as exc:
            raise ActionError("This undo names mail that is not yours.") from exc
        return "Undone."

    def _present(self, message_ids: list[int]) -> list[int]:
        """The ids of these that still exist (the operations refuse another user's)."""
        return sorted(self.session.scalars(select(Message.id).where(Message.id.in_(message_ids))))

    def _check_labels(self, label_ids: set[int]) -> None:
        if not label_ids:
            return
        owners = set(self.session.scalars(select(Label.user_id).where(Label.id.in_(label_ids))))
        if owners - {self.user_id}:
            raise ActionError("This undo names mail that is not yours.")


def _label_diff(before: LabelSets, after: LabelSets) -> list[list[list[int]]]:
    """[[message ids], [added], [removed]] for each distinct change."""
    groups: dict[tuple[tuple[int, ...], tuple[int, ...]], list[int]] = defaultdict(list)
    for mid, was in before.items():
        now = after.get(mid, frozenset())
        if was != now:
            groups[(tuple(sorted(now - was)), tuple(sorted(was - now)))].append(mid)
    return [[ids, list(added), list(removed)] for (added, removed), ids in groups.items()]


def _read_diff(unread_before: set[int], unread_after: set[int]) -> list[Any]:
    """[[message ids], read?]: the messages the action read (or unread)."""
    read = sorted(unread_before - unread_after)
    if read:
        return [read, True]
    return [sorted(unread_after - unread_before), False]
