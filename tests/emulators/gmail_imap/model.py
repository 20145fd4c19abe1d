"""The Gmail mailbox model behind the IMAP emulator: messages with labels, seen as folders.

Gmail stores each message once, with a set of labels; IMAP shows it as folders.
This model keeps the Gmail side — every message has a stable 64-bit
``X-GM-MSGID``, an ``X-GM-THRID``, a label set, IMAP flags, a mod-sequence and
a place (``all``, ``spam`` or ``trash``) — and derives the folders from it:

============================ ==================================================
folder                       holds the messages that ...
============================ ==================================================
``INBOX``                    carry ``\\Inbox`` (and are not in Spam/Trash)
``[Gmail]/All Mail`` \\All    are not in Spam or Trash
``[Gmail]/Sent Mail`` \\Sent  carry ``\\Sent``
``[Gmail]/Drafts`` \\Drafts   carry ``\\Draft``
``[Gmail]/Starred`` \\Flagged carry ``\\Starred`` (the same as the ``\\Flagged`` flag)
``[Gmail]/Important``        carry ``\\Important``
``[Gmail]/Spam`` \\Junk       are in Spam
``[Gmail]/Trash`` \\Trash     are in Trash
``<label>``                  carry the user label (nested names use ``/``)
============================ ==================================================

So one message appears in All Mail and in each of its label folders, with a
UID of its own in each (a folder numbers a message when it enters it, as Gmail
does). Every change of a message's labels or flags bumps its mod-sequence;
a message leaving a folder bumps that folder's, so CONDSTORE clients see both.

Scripting (tests, demos): :meth:`GmailModel.add`, :meth:`relabel`,
:meth:`set_flags`, :meth:`trash`, :meth:`spam`, :meth:`untrash`, :meth:`delete`;
reading: :meth:`message`, :meth:`messages`, :meth:`folder_uids`.
"""

from __future__ import annotations

import email
import email.policy
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

__all__ = [
    "ALL_MAIL",
    "INBOX",
    "SPAM",
    "SYSTEM_FOLDERS",
    "TRASH",
    "FolderInfo",
    "GmailMessage",
    "GmailModel",
]

INBOX = "INBOX"
ALL_MAIL = "[Gmail]/All Mail"
SPAM = "[Gmail]/Spam"
TRASH = "[Gmail]/Trash"
SENT = "[Gmail]/Sent Mail"
DRAFTS = "[Gmail]/Drafts"
STARRED = "[Gmail]/Starred"
IMPORTANT = "[Gmail]/Important"
PARENT = "[Gmail]"
DELIMITER = "/"

# Folder -> (special-use attribute or None, the system label it shows, or None).
SYSTEM_FOLDERS: dict[str, tuple[str | None, str | None]] = {
    INBOX: (None, "\\Inbox"),
    ALL_MAIL: ("\\All", None),
    SENT: ("\\Sent", "\\Sent"),
    DRAFTS: ("\\Drafts", "\\Draft"),
    STARRED: ("\\Flagged", "\\Starred"),
    IMPORTANT: ("\\Important", "\\Important"),
    SPAM: ("\\Junk", None),
    TRASH: ("\\Trash", None),
}
SYSTEM_LABELS = frozenset({"\\Inbox", "\\Sent", "\\Draft", "\\Starred", "\\Important"})
FIRST_MSGID = 0x17C0FFEE00000000  # Gmail's ids are large 64-bit numbers


@dataclass
class GmailMessage:
    """One Gmail message: stored once, whatever the number of its labels."""

    msgid: int
    thrid: int
    raw: bytes
    internaldate: datetime
    labels: set[str] = field(default_factory=set)  # system labels keep their backslash
    flags: set[str] = field(default_factory=set)  # IMAP flags other than \Flagged
    place: str = "all"  # "all", "spam" or "trash"
    modseq: int = 1

    @property
    def message_id(self) -> str | None:
        """The Message-ID header, without angle brackets."""
        value = _header(self.raw, "Message-ID")
        return value.strip().strip("<>") if value else None

    def imap_flags(self) -> set[str]:
        """The flags IMAP shows: \\Flagged is the \\Starred label."""
        return self.flags | ({"\\Flagged"} if "\\Starred" in self.labels else set())


@dataclass
class FolderInfo:
    """The IMAP numbering of one folder."""

    uidvalidity: int
    uidnext: int = 1
    uids: dict[int, int] = field(default_factory=dict)  # msgid -> uid
    modseq: int = 1  # raised when a message leaves


def _header(raw: bytes, name: str) -> str | None:
    parsed = email.message_from_bytes(raw, policy=email.policy.compat32)
    value = parsed.get(name)
    return str(value) if value is not None else None


class GmailModel:
    """One Gmail account's mail (thread-safe: every method takes the lock)."""

    def __init__(self, uidvalidity: int = 1) -> None:
        self.lock = threading.RLock()
        self.messages_by_id: dict[int, GmailMessage] = {}
        self.user_labels: set[str] = set()
        self.folders: dict[str, FolderInfo] = {}
        self._next_msgid = FIRST_MSGID
        self._modseq = 1
        self._uidvalidity = uidvalidity
        self.version = 0  # raised by every change, for IDLE
        for name in SYSTEM_FOLDERS:
            self._folder(name)

    # -- folders ----------------------------------------------------------------

    def _folder(self, name: str) -> FolderInfo:
        info = self.folders.get(name)
        if info is None:
            self._uidvalidity += 1
            info = FolderInfo(uidvalidity=self._uidvalidity)
            self.folders[name] = info
        return info

    def folder_names(self) -> list[str]:
        """Every selectable folder: the system ones and one per user label (parents too)."""
        with self.lock:
            return [*SYSTEM_FOLDERS, *sorted(self._all_user_labels())]

    def _all_user_labels(self) -> set[str]:
        names = set(self.user_labels)
        for label in self.user_labels:
            parts = label.split(DELIMITER)
            names.update(DELIMITER.join(parts[:depth]) for depth in range(1, len(parts)))
        return names

    def has_folder(self, name: str) -> bool:
        """Whether the folder exists (system folders, user labels and their parents)."""
        with self.lock:
            return name in SYSTEM_FOLDERS or name in self._all_user_labels()

    def holds(self, folder: str, message: GmailMessage) -> bool:
        """Whether ``folder`` shows ``message``."""
        if folder == SPAM:
            return message.place == "spam"
        if folder == TRASH:
            return message.place == "trash"
        if message.place != "all":
            return False
        if folder == ALL_MAIL:
            return True
        if folder in SYSTEM_FOLDERS:
            label = SYSTEM_FOLDERS[folder][1]
            return label is not None and label in message.labels
        return folder in message.labels

    def _reindex(self) -> None:
        """Number messages that entered a folder; forget those that left it."""
        for name in self.folder_names():
            info = self._folder(name)
            members = {m.msgid for m in self.messages_by_id.values() if self.holds(name, m)}
            for msgid in [m for m in info.uids if m not in members]:
                del info.uids[msgid]
                self._modseq += 1
                info.modseq = self._modseq
            for msgid in sorted(members - set(info.uids)):
                info.uids[msgid] = info.uidnext
                info.uidnext += 1
        for name in [n for n in self.folders if not self.has_folder(n)]:
            del self.folders[name]
        self.version += 1

    def folder_uids(self, folder: str) -> dict[int, int]:
        """UID -> msgid of the folder's messages (ascending UIDs)."""
        with self.lock:
            info = self.folders.get(folder)
            if info is None:
                return {}
            return {uid: msgid for msgid, uid in sorted(info.uids.items(), key=lambda x: x[1])}

    def status(self, folder: str) -> FolderInfo:
        """The folder's numbering (a live object: read it under the lock)."""
        with self.lock:
            return self._folder(folder)

    def highest_modseq(self, folder: str) -> int:
        """HIGHESTMODSEQ of a folder: its messages' and its own (raised by departures)."""
        with self.lock:
            info = self._folder(folder)
            found = [self.messages_by_id[m].modseq for m in info.uids]
            return max([info.modseq, *found])

    # -- reading ----------------------------------------------------------------

    def message(self, msgid: int) -> GmailMessage:
        """The message with this X-GM-MSGID (KeyError when there is none)."""
        with self.lock:
            return self.messages_by_id[msgid]

    def messages(self) -> list[GmailMessage]:
        """Every message, in X-GM-MSGID order."""
        with self.lock:
            return [self.messages_by_id[k] for k in sorted(self.messages_by_id)]

    def find(self, message_id: str) -> GmailMessage | None:
        """The message with this Message-ID header, if any."""
        with self.lock:
            for message in self.messages_by_id.values():
                if message.message_id == message_id.strip("<>"):
                    return message
            return None

    # -- changing ---------------------------------------------------------------

    def _touch(self, message: GmailMessage) -> None:
        self._modseq += 1
        message.modseq = self._modseq

    def _thread_of(self, raw: bytes) -> int | None:
        """The thread of a stored message this one replies to (References, In-Reply-To)."""
        named = " ".join(filter(None, [_header(raw, "References"), _header(raw, "In-Reply-To")]))
        ids = {part.strip("<>") for part in named.split()}
        for message in self.messages_by_id.values():
            if message.message_id in ids:
                return message.thrid
        return None

    def add(
        self,
        raw: bytes,
        labels: Iterable[str] = ("\\Inbox",),
        *,
        flags: Iterable[str] = (),
        thrid: int | None = None,
        place: str = "all",
        internaldate: datetime | None = None,
    ) -> int:
        """Deliver a message with these labels; returns its X-GM-MSGID."""
        with self.lock:
            msgid = self._next_msgid
            self._next_msgid += 1
            wanted = set(labels)
            message = GmailMessage(
                msgid=msgid,
                thrid=thrid or self._thread_of(raw) or msgid,
                raw=raw,
                internaldate=internaldate or datetime.now(UTC).replace(microsecond=0),
                labels=wanted,
                flags=set(flags) - {"\\Flagged"},
                place=place,
            )
            if "\\Flagged" in set(flags):
                message.labels.add("\\Starred")
            self.user_labels.update(x for x in wanted if x not in SYSTEM_LABELS)
            self._touch(message)
            self.messages_by_id[msgid] = message
            self._reindex()
            return msgid

    def relabel(self, msgid: int, add: Iterable[str] = (), remove: Iterable[str] = ()) -> None:
        """Add and remove labels (as Gmail's web UI or another client would)."""
        with self.lock:
            message = self.messages_by_id[msgid]
            added, removed = set(add), set(remove)
            message.labels = (message.labels - removed) | added
            self.user_labels.update(x for x in added if x not in SYSTEM_LABELS)
            self._touch(message)
            self._reindex()

    def set_flags(self, msgid: int, add: Iterable[str] = (), remove: Iterable[str] = ()) -> None:
        """Add and remove IMAP flags; \\Flagged is the \\Starred label."""
        with self.lock:
            message = self.messages_by_id[msgid]
            for flag in add:
                if flag == "\\Flagged":
                    message.labels.add("\\Starred")
                else:
                    message.flags.add(flag)
            for flag in remove:
                if flag == "\\Flagged":
                    message.labels.discard("\\Starred")
                else:
                    message.flags.discard(flag)
            self._touch(message)
            self._reindex()

    def _place(self, msgid: int, place: str) -> None:
        with self.lock:
            message = self.messages_by_id[msgid]
            message.place = place
            if place != "all":  # Gmail takes trashed and spam mail out of the inbox
                message.flags.discard("\\Deleted")
                message.labels.discard("\\Inbox")
            self._touch(message)
            self._reindex()

    def trash(self, msgid: int) -> None:
        """Move a message to the Trash (it leaves All Mail and every label folder)."""
        self._place(msgid, "trash")

    def spam(self, msgid: int) -> None:
        """Report a message as spam."""
        self._place(msgid, "spam")

    def untrash(self, msgid: int) -> None:
        """Bring a message back from Trash or Spam; it keeps its labels."""
        self._place(msgid, "all")

    def delete(self, msgid: int) -> None:
        """Delete a message forever."""
        with self.lock:
            del self.messages_by_id[msgid]
            self._reindex()

    # -- label folders ----------------------------------------------------------

    def create_label(self, name: str) -> None:
        """A new, empty user label (IMAP CREATE)."""
        with self.lock:
            self.user_labels.add(name)
            self._reindex()

    def rename_label(self, old: str, new: str) -> None:
        """Rename a user label and its children on every message (IMAP RENAME)."""
        with self.lock:

            def renamed(label: str) -> str:
                if label == old or label.startswith(old + DELIMITER):
                    return new + label[len(old) :]
                return label

            self.user_labels = {renamed(x) for x in self._all_user_labels()}
            for message in self.messages_by_id.values():
                if any(renamed(x) != x for x in message.labels):
                    message.labels = {renamed(x) for x in message.labels}
                    self._touch(message)
            for name in [n for n in self.folders if renamed(n) != n]:
                self.folders[renamed(name)] = self.folders.pop(name)
            self._reindex()

    def delete_label(self, name: str) -> None:
        """Remove a user label from every message (IMAP DELETE of a label folder)."""
        with self.lock:
            self.user_labels = {x for x in self._all_user_labels() if x != name}
            for message in self.messages_by_id.values():
                if name in message.labels:
                    message.labels.discard(name)
                    self._touch(message)
            self._reindex()

    # -- what IMAP commands do to the model ---------------------------------------

    def copy_into(self, msgid: int, folder: str) -> None:
        """What COPY (and the first half of MOVE) to ``folder`` means in Gmail."""
        with self.lock:
            message = self.messages_by_id[msgid]
            if folder in (TRASH, SPAM):
                message.place = "trash" if folder == TRASH else "spam"
                message.labels.discard("\\Inbox")
            else:
                message.place = "all"
                label = SYSTEM_FOLDERS[folder][1] if folder in SYSTEM_FOLDERS else folder
                if label is not None:
                    message.labels.add(label)
                    if folder not in SYSTEM_FOLDERS:
                        self.user_labels.add(folder)
            self._touch(message)
            self._reindex()

    def expunge_from(self, msgid: int, folder: str) -> None:
        """What expunging a message from ``folder`` means in Gmail.

        From Trash or Spam: deleted forever. From All Mail: moved to the Trash.
        From a label folder (INBOX included): that label is removed.
        """
        with self.lock:
            message = self.messages_by_id.get(msgid)
            if message is None or not self.holds(folder, message):
                return
            message.flags.discard("\\Deleted")
            if folder in (TRASH, SPAM):
                del self.messages_by_id[msgid]
            elif folder == ALL_MAIL:
                message.place = "trash"
                self._touch(message)
            else:
                label = SYSTEM_FOLDERS[folder][1] if folder in SYSTEM_FOLDERS else folder
                message.labels.discard(label or "")
                self._touch(message)
            self._reindex()

    def append(self, folder: str, raw: bytes, flags: Iterable[str]) -> int:
        """APPEND: a new message with the folder's label; returns its X-GM-MSGID."""
        with self.lock:
            if folder in SYSTEM_FOLDERS:
                label = SYSTEM_FOLDERS[folder][1]
                labels = [label] if label else []
            else:
                labels = [folder]
            place = {TRASH: "trash", SPAM: "spam"}.get(folder, "all")
            return self.add(raw, labels, flags=flags, place=place)
