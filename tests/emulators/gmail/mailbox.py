"""One Gmail mailbox: messages, labels, threads, drafts and the history log.

Invariants (what the API shows and tests rely on):

* Every change to a message gets a new mailbox ``historyId``; ids increase
  but are not contiguous. The message's ``historyId`` is the id of its last
  change, and the history log holds one record per change, in ascending id:
  ``messageAdded`` / ``messageDeleted`` (permanent deletion only) /
  ``labelAdded`` / ``labelRemoved``. Trash is ``labelAdded`` TRASH.
* :meth:`Mailbox.expire_history` drops the records before an id; a
  ``startHistoryId`` older than the oldest kept one answers 404.
* A message joins a thread when Gmail would: delivered mail (the scripting
  :meth:`Mailbox.add_message`) joins the thread of a message it names in
  References/In-Reply-To whose subject matches; sent mail joins only the
  ``threadId`` it names, and only if those two hold too.
* System label ids equal their names; user label ids are ``Label_N``.
  SENT, DRAFT and CHAT cannot be added or removed by a client.

All methods are thread-safe (one lock): the HTTP server answers on many threads.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.emulators.gmail.errors import conflict, invalid_argument, not_found
from tests.emulators.gmail.payload import header_fields

CATEGORY_LABELS = (
    "CATEGORY_PERSONAL",
    "CATEGORY_SOCIAL",
    "CATEGORY_PROMOTIONS",
    "CATEGORY_UPDATES",
    "CATEGORY_FORUMS",
)
SYSTEM_LABELS = (
    "INBOX",
    "SENT",
    "DRAFT",
    "SPAM",
    "TRASH",
    "UNREAD",
    "STARRED",
    "IMPORTANT",
    "CHAT",
    *CATEGORY_LABELS,
)
HIDDEN_SYSTEM = {"CHAT", "SPAM", "TRASH", *CATEGORY_LABELS}
NOT_APPLICABLE = {"SENT", "DRAFT", "CHAT"}
MAX_LABELS = 10_000
MAX_MODIFY_LABELS = 100
HISTORY_STEPS = (1, 3, 2, 5)  # gaps between consecutive history ids
_REPLY_PREFIX = re.compile(r"^\s*((re|fwd?|aw|sv|wg)\s*(\[\d+\])?\s*:\s*)+", re.IGNORECASE)
_MESSAGE_ID = re.compile(r"<[^<>\s]+>")


def thread_subject(subject: str) -> str:
    """The subject Gmail compares for threading: reply/forward prefixes dropped."""
    return " ".join(_REPLY_PREFIX.sub("", subject).split()).casefold()


@dataclass
class Label:
    """A system or user label."""

    id: str
    name: str
    type: str  # "system" or "user"
    message_list_visibility: str | None = None
    label_list_visibility: str | None = None
    color: dict[str, str] | None = None

    def listed(self) -> dict[str, Any]:
        """The label as labels.list shows it."""
        shown: dict[str, Any] = {"id": self.id, "name": self.name}
        if self.message_list_visibility:
            shown["messageListVisibility"] = self.message_list_visibility
        if self.label_list_visibility:
            shown["labelListVisibility"] = self.label_list_visibility
        shown["type"] = self.type
        return shown


@dataclass
class StoredMessage:
    """A message as the mailbox holds it."""

    id: str
    thread_id: str
    raw: bytes
    labels: set[str]
    internal_date: int  # epoch milliseconds
    history_id: int
    unfetchable: bool = False  # listed, but messages.get answers 404
    subject_key: str = ""  # thread_subject() of its Subject, for threading

    def ref(self) -> dict[str, str]:
        """``{id, threadId}`` as lists and history records show a message."""
        return {"id": self.id, "threadId": self.thread_id}

    def labelled_ref(self, labels: Iterable[str] | None = None) -> dict[str, Any]:
        """``{id, threadId, labelIds}``."""
        return {**self.ref(), "labelIds": sorted(self.labels if labels is None else labels)}


@dataclass
class HistoryEvent:
    """One part of a history record: what happened and with which labels."""

    kind: str  # messageAdded, messageDeleted, labelAdded, labelRemoved
    labels: tuple[str, ...]  # the changed labels (added/removed) or the message's labels


@dataclass
class HistoryRecord:
    """One change to one message."""

    id: int
    message: dict[str, str]
    message_labels: tuple[str, ...]
    events: list[HistoryEvent] = field(default_factory=list)


@dataclass
class Draft:
    """A draft: an id of its own pointing at a message labelled DRAFT."""

    id: str
    message_id: str


class Mailbox:
    """The state of one user's mailbox (see the module docstring)."""

    def __init__(self, address: str = "owner@example.com", first_history_id: int = 1000) -> None:
        self.address = address
        self.lock = threading.RLock()
        self.messages: dict[str, StoredMessage] = {}
        self._by_message_id: dict[str, list[str]] = {}  # Message-ID header -> message ids
        self._order: list[StoredMessage] | None = (
            None  # newest first, until a message comes or goes
        )
        self.labels: dict[str, Label] = {}
        self.drafts: dict[str, Draft] = {}
        self.history: list[HistoryRecord] = []
        self.history_id = first_history_id
        self.history_floor = first_history_id
        self._steps = itertools.cycle(HISTORY_STEPS)
        self._message_numbers = itertools.count(1)
        self._label_numbers = itertools.count(1)
        self._draft_numbers = itertools.count(1)
        self._last_date = 0
        for name in SYSTEM_LABELS:
            hidden = name in HIDDEN_SYSTEM
            self.labels[name] = Label(
                name,
                name,
                "system",
                "hide" if hidden else None,
                "labelHide" if hidden else None,
            )

    # -- ids and history --------------------------------------------------

    def _next_history_id(self) -> int:
        self.history_id += next(self._steps)
        return self.history_id

    def _new_message_id(self) -> str:
        return f"{0x18F3A00000000000 + next(self._message_numbers) * 0x2D:016x}"

    def _date(self, internal_date: int | None) -> int:
        if internal_date is None:
            internal_date = max(int(time.time() * 1000), self._last_date + 1)
        self._last_date = max(self._last_date, internal_date)
        return internal_date

    def _record(self, message: StoredMessage, *events: HistoryEvent) -> None:
        message.history_id = self._next_history_id()
        self.history.append(
            HistoryRecord(
                message.history_id, message.ref(), tuple(sorted(message.labels)), list(events)
            )
        )

    # -- lookups ----------------------------------------------------------

    def message(self, message_id: str) -> StoredMessage:
        """The message with that id, or a 404."""
        found = self.messages.get(message_id)
        if found is None:
            raise not_found()
        return found

    def fetchable(self, message_id: str) -> StoredMessage:
        """The message, or a 404 also for a listed-but-unfetchable id."""
        found = self.message(message_id)
        if found.unfetchable:
            raise not_found()
        return found

    def label(self, label_id: str) -> Label:
        """The label with that id, or a 404."""
        found = self.labels.get(label_id)
        if found is None:
            raise not_found()
        return found

    def thread(self, thread_id: str) -> list[StoredMessage]:
        """The thread's messages, oldest first (404 when there is none)."""
        members = [m for m in self.messages.values() if m.thread_id == thread_id]
        if not members:
            raise not_found()
        return sorted(members, key=lambda m: (m.internal_date, m.id))

    def newest_first(self) -> list[StoredMessage]:
        """Every message, newest first (the order of messages.list)."""
        if self._order is None:
            self._order = sorted(
                self.messages.values(), key=lambda m: (m.internal_date, m.id), reverse=True
            )
        return list(self._order)

    # -- threading --------------------------------------------------------

    def _thread_by_references(self, raw: bytes, thread_id: str | None = None) -> str | None:
        """The newest thread holding a message ``raw`` names with the same subject."""
        headers = header_fields(raw)
        subject = thread_subject(headers.get("subject", ""))
        named_ids = f"{headers.get('references', '')} {headers.get('in-reply-to', '')}"
        candidates = [
            self.messages[stored_id]
            for named in set(_MESSAGE_ID.findall(named_ids))
            for stored_id in self._by_message_id.get(named, ())
        ]
        for candidate in sorted(candidates, key=lambda m: m.internal_date, reverse=True):
            if thread_id is not None and candidate.thread_id != thread_id:
                continue
            if candidate.subject_key == subject:
                return candidate.thread_id
        return None

    def thread_for_delivery(self, raw: bytes) -> str | None:
        """The thread delivered mail joins (by References/In-Reply-To and Subject)."""
        return self._thread_by_references(raw)

    def thread_for_sending(self, raw: bytes, thread_id: str | None) -> str | None:
        """The thread sent mail joins: the named one, only if references and subject agree."""
        return self._thread_by_references(raw, thread_id) if thread_id else None

    # -- adding and removing ----------------------------------------------

    def add(
        self,
        raw: bytes,
        labels: Iterable[str],
        *,
        thread_id: str | None = None,
        internal_date: int | None = None,
        unfetchable: bool = False,
    ) -> StoredMessage:
        """Store a message (labels must exist) and log ``messageAdded``."""
        with self.lock:
            wanted = set(labels)
            unknown = wanted - self.labels.keys()
            if unknown:
                raise invalid_argument(f"Invalid label: {sorted(unknown)[0]}")
            message_id = self._new_message_id()
            message = StoredMessage(
                message_id,
                thread_id or message_id,
                raw,
                wanted,
                self._date(internal_date),
                0,
                unfetchable,
            )
            headers = header_fields(raw)
            message.subject_key = thread_subject(headers.get("subject", ""))
            self.messages[message_id] = message
            self._order = None
            header_id = headers.get("message-id", "").strip()
            if header_id:
                self._by_message_id.setdefault(header_id, []).append(message_id)
            self._record(message, HistoryEvent("messageAdded", tuple(sorted(wanted))))
            return message

    def delete(self, message_id: str) -> None:
        """Delete a message forever (``messageDeleted``); its draft goes with it."""
        with self.lock:
            message = self.message(message_id)
            del self.messages[message_id]
            self._order = None
            for holders in self._by_message_id.values():
                if message_id in holders:
                    holders.remove(message_id)
            for draft_id, draft in list(self.drafts.items()):
                if draft.message_id == message_id:
                    del self.drafts[draft_id]
            self._record(message, HistoryEvent("messageDeleted", tuple(sorted(message.labels))))

    # -- labels on messages -----------------------------------------------

    def change_labels(
        self,
        message_id: str,
        add: Iterable[str] = (),
        remove: Iterable[str] = (),
        *,
        by_client: bool = True,
    ) -> StoredMessage:
        """Add and remove labels in one change (one history record); no-op changes log nothing."""
        with self.lock:
            message = self.message(message_id)
            add_set, remove_set = set(add), set(remove)
            self._check_labels(add_set | remove_set, by_client)
            added = sorted(add_set - message.labels)
            removed = sorted((remove_set - add_set) & message.labels)
            if not added and not removed:
                return message
            message.labels |= set(added)
            message.labels -= set(removed)
            events = []
            if added:
                events.append(HistoryEvent("labelAdded", tuple(added)))
            if removed:
                events.append(HistoryEvent("labelRemoved", tuple(removed)))
            self._record(message, *events)
            return message

    def _check_labels(self, label_ids: set[str], by_client: bool) -> None:
        for label_id in sorted(label_ids):
            if label_id not in self.labels or (by_client and label_id in NOT_APPLICABLE):
                raise invalid_argument(f"Invalid label: {label_id}")

    def set_labels(self, message_id: str, labels: Iterable[str]) -> StoredMessage:
        """Make the message's labels exactly ``labels`` (Gmail relabelling it)."""
        with self.lock:
            message = self.message(message_id)
            wanted = set(labels)
            return self.change_labels(
                message_id, wanted - message.labels, message.labels - wanted, by_client=False
            )

    def categorize(self, message_id: str, category: str) -> StoredMessage:
        """Move the message into one CATEGORY_* tab (the others removed)."""
        if category not in CATEGORY_LABELS:
            raise invalid_argument(f"Invalid label: {category}")
        others = [c for c in CATEGORY_LABELS if c != category]
        return self.change_labels(message_id, [category], others, by_client=False)

    # -- user labels ------------------------------------------------------

    def _name_taken(self, name: str, except_id: str | None = None) -> bool:
        folded = name.casefold()
        return any(
            label.name.casefold() == folded and label.id != except_id
            for label in self.labels.values()
        )

    def create_label(self, name: str, fields: dict[str, Any] | None = None) -> Label:
        """A new user label (409 if the name exists, case-insensitively)."""
        with self.lock:
            name = (name or "").strip()
            if not name:
                raise invalid_argument("Invalid label name")
            if self._name_taken(name):
                raise conflict("Label name exists or conflicts")
            if len(self.labels) >= MAX_LABELS:
                raise invalid_argument("Too many labels")
            label = Label(f"Label_{next(self._label_numbers)}", name, "user")
            self._apply_label_fields(label, fields or {})
            self.labels[label.id] = label
            return label

    def _apply_label_fields(self, label: Label, fields: dict[str, Any]) -> None:
        if "messageListVisibility" in fields:
            label.message_list_visibility = fields["messageListVisibility"]
        if "labelListVisibility" in fields:
            label.label_list_visibility = fields["labelListVisibility"]
        if "color" in fields:
            label.color = fields["color"]

    def patch_label(self, label_id: str, fields: dict[str, Any]) -> Label:
        """Rename or restyle a user label (system labels cannot be changed)."""
        with self.lock:
            label = self.label(label_id)
            if label.type == "system":
                raise invalid_argument("Invalid update request")
            if "name" in fields:
                name = (fields["name"] or "").strip()
                if not name:
                    raise invalid_argument("Invalid label name")
                if self._name_taken(name, except_id=label_id):
                    raise conflict("Label name exists or conflicts")
                label.name = name
            self._apply_label_fields(label, fields)
            return label

    def delete_label(self, label_id: str) -> None:
        """Delete a user label; it is removed from its messages (``labelRemoved``)."""
        with self.lock:
            label = self.label(label_id)
            if label.type == "system":
                raise invalid_argument("Invalid delete request")
            for message in list(self.messages.values()):
                if label_id in message.labels:
                    message.labels.discard(label_id)
                    self._record(message, HistoryEvent("labelRemoved", (label_id,)))
            del self.labels[label_id]

    def label_counts(self, label_id: str) -> dict[str, int]:
        """messagesTotal/Unread and threadsTotal/Unread of one label."""
        with self.lock:
            having = [m for m in self.messages.values() if label_id in m.labels]
            unread = [m for m in having if "UNREAD" in m.labels]
            return {
                "messagesTotal": len(having),
                "messagesUnread": len(unread),
                "threadsTotal": len({m.thread_id for m in having}),
                "threadsUnread": len({m.thread_id for m in unread}),
            }

    # -- drafts -----------------------------------------------------------

    def create_draft(self, raw: bytes, thread_id: str | None) -> Draft:
        """A draft: a message labelled DRAFT, threaded like sent mail."""
        with self.lock:
            thread = self.thread_for_sending(raw, thread_id)
            message = self.add(raw, ["DRAFT"], thread_id=thread)
            draft = Draft(f"r{7_100_000_000_000_000_000 + next(self._draft_numbers)}", message.id)
            self.drafts[draft.id] = draft
            return draft

    def draft(self, draft_id: str) -> Draft:
        """The draft with that id, or a 404."""
        found = self.drafts.get(draft_id)
        if found is None:
            raise not_found()
        return found

    def send_draft(self, draft_id: str) -> StoredMessage:
        """Send a draft: its message loses DRAFT and gains SENT; the draft is gone."""
        with self.lock:
            draft = self.draft(draft_id)
            del self.drafts[draft_id]
            return self.change_labels(draft.message_id, ["SENT"], ["DRAFT"], by_client=False)

    # -- history ----------------------------------------------------------

    def expire_history(self, before: int) -> None:
        """Forget the records older than ``before``: older start ids then answer 404."""
        with self.lock:
            self.history = [record for record in self.history if record.id >= before]
            self.history_floor = max(self.history_floor, before - 1)

    def history_after(self, start: int) -> Iterator[HistoryRecord]:
        """The records after ``start`` in ascending order (404 if ``start`` is too old)."""
        with self.lock:
            if start < self.history_floor:
                raise not_found()
            records = [record for record in self.history if record.id > start]
        return iter(records)
