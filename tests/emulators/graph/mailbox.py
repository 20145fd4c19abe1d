"""One emulated Exchange mailbox: folders, messages and the bookkeeping delta reads.

Invariants the routes and the scripting API rely on:

* A message lives in exactly one folder. Its REST ``id`` changes on every move
  (Exchange ids encode the folder); its ``immutable_id`` never does. Both are
  case-sensitive, and a lookup accepts either; an old REST id is not found.
* Every change (arrival, move, flag, read, categories, removal) takes the next
  mailbox-wide sequence number and writes it on the message's **entry** in each
  folder it touched: an entry per REST id per folder, present or removed (with
  the reason: ``changed`` when it left the folder, ``deleted`` when it is gone).
  A delta round is "the entries of a folder whose sequence is above the token's".
* Folder creations, renames, moves and deletions take a sequence number too
  (:attr:`Mailbox.folder_changes`), for ``/me/mailFolders/delta``; count
  changes (unread, total) are not tracked there.
* Well-known names (``inbox``, ``sentitems``, ...) are aliases of folder ids,
  matched case-insensitively; ``msgfolderroot`` is the root, which is never listed.

All methods take the mailbox lock; the server calls them from many threads.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.emulators.graph import mime_props
from tests.emulators.graph.errors import GraphError, bad_request, not_found

# well-known name -> display name, in the order Outlook lists them
WELL_KNOWN = {
    "inbox": "Inbox",
    "drafts": "Drafts",
    "sentitems": "Sent Items",
    "deleteditems": "Deleted Items",
    "junkemail": "Junk Email",
    "archive": "Archive",
    "outbox": "Outbox",
}
HIDDEN_FOLDER = "Sync Issues"  # a hidden top-level folder, as real mailboxes have
FLAG_STATUSES = ("notFlagged", "flagged", "complete")
ALL_PROPERTIES = (
    "createdDateTime",
    "lastModifiedDateTime",
    "changeKey",
    "categories",
    "receivedDateTime",
    "sentDateTime",
    "hasAttachments",
    "internetMessageId",
    "subject",
    "bodyPreview",
    "importance",
    "parentFolderId",
    "conversationId",
    "isRead",
    "isDraft",
    "webLink",
    "body",
    "sender",
    "from",
    "toRecipients",
    "ccRecipients",
    "bccRecipients",
    "replyTo",
    "flag",
)
SELECT_ONLY = ("internetMessageHeaders", "uniqueBody")


def new_id(prefix: str) -> str:
    """An opaque, case-sensitive, URL-safe id in the style of Exchange's."""
    return prefix + base64.urlsafe_b64encode(secrets.token_bytes(18)).decode().rstrip("=")


@dataclass
class Folder:
    """A mail folder; ``parent_id`` is None only for the root."""

    id: str
    display_name: str
    parent_id: str | None
    well_known: str | None = None
    hidden: bool = False


@dataclass
class Message:
    """A message as the mailbox holds it (the raw MIME and what Graph derives from it)."""

    id: str
    immutable_id: str
    folder_id: str
    raw: bytes
    props: dict[str, Any]
    conversation_id: str
    created: datetime
    modified: datetime
    change_key: str = field(default_factory=lambda: new_id("CQAAAB"))
    is_read: bool = False
    is_draft: bool = False
    flag_status: str = "notFlagged"
    categories: list[str] = field(default_factory=list)


@dataclass
class Entry:
    """What a folder's delta knows of one REST id: last change and whether it left."""

    seq: int
    rest_id: str
    immutable_id: str
    removed: str | None = None  # "changed" | "deleted" once it is no longer here


class Mailbox:
    """The state of one user's mailbox; thread-safe."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.lock = threading.RLock()
        self.seq = 0
        self.folders: dict[str, Folder] = {}
        self.aliases: dict[str, str] = {}
        self.messages: dict[str, Message] = {}
        self.by_immutable: dict[str, Message] = {}
        self.entries: dict[str, dict[str, Entry]] = {}
        self.folder_changes: dict[str, Entry] = {}  # what /me/mailFolders/delta reads
        self.conversations: dict[str, str] = {}
        self.sent: list[bytes] = []  # the MIME of every message sent with sendMail
        root = self._add_folder("Top of Information Store", None, "msgfolderroot")
        for name, display in WELL_KNOWN.items():
            self._add_folder(display, root.id, name)
        self._add_folder(HIDDEN_FOLDER, root.id, None, hidden=True)

    # -- folders -------------------------------------------------------------

    @property
    def root(self) -> Folder:
        """The folder above the top-level folders (``msgfolderroot``)."""
        return self.folders[self.aliases["msgfolderroot"]]

    def _add_folder(
        self, name: str, parent_id: str | None, well_known: str | None, hidden: bool = False
    ) -> Folder:
        folder = Folder(new_id("AAMkAGF"), name, parent_id, well_known, hidden)
        self.folders[folder.id] = folder
        self.entries[folder.id] = {}
        self._folder_changed(folder.id)
        if well_known:
            self.aliases[well_known] = folder.id
        return folder

    def folder(self, ref: str) -> Folder:
        """A folder by id or well-known name; 404 ErrorItemNotFound if there is none."""
        with self.lock:
            found = self.folders.get(ref) or self.folders.get(self.aliases.get(ref.lower(), ""))
            if found is None:
                raise not_found("The specified folder could not be found in the store.")
            return found

    def children(self, parent: Folder, include_hidden: bool) -> list[Folder]:
        """The folders directly under ``parent``, in creation order."""
        with self.lock:
            return [
                f
                for f in self.folders.values()
                if f.parent_id == parent.id and (include_hidden or not f.hidden)
            ]

    def create_folder(self, name: str, parent: str | None = None, hidden: bool = False) -> Folder:
        """A new folder under ``parent`` (the root by default); 409 if the name is taken."""
        if not name.strip():
            raise bad_request("The folder name must not be empty.", "ErrorInvalidRequest")
        with self.lock:
            above = self.folder(parent) if parent else self.root
            self._name_free(above.id, name)
            return self._add_folder(name, above.id, None, hidden)

    def _name_free(self, parent_id: str, name: str) -> None:
        for other in self.folders.values():
            if other.parent_id == parent_id and other.display_name.lower() == name.lower():
                raise GraphError(
                    409, "ErrorFolderExists", "A folder with the specified name already exists."
                )

    def rename_folder(self, ref: str, name: str) -> Folder:
        """Give a folder a new display name (not a well-known one)."""
        with self.lock:
            folder = self._user_folder(ref)
            assert folder.parent_id is not None
            if folder.display_name != name:
                self._name_free(folder.parent_id, name)
            folder.display_name = name
            self._folder_changed(folder.id)
            return folder

    def move_folder(self, ref: str, destination: str) -> Folder:
        """Put a user folder (its subfolders and messages along) under ``destination``.

        The folder keeps its id; the moved folder and both parents (their child
        counts changed) are reported by the folder delta. A folder cannot go
        under itself or a descendant, and a sibling of the same name is a 409.
        """
        with self.lock:
            folder = self._user_folder(ref, "ErrorMoveDistinguishedFolder", "moved")
            target = self.folder(destination)
            above: Folder | None = target
            while above is not None:
                if above.id == folder.id:
                    raise bad_request(
                        "A folder cannot be moved under itself or its subfolders.",
                        "ErrorMoveCopyFailed",
                    )
                above = self.folders.get(above.parent_id or "")
            old_parent = folder.parent_id
            assert old_parent is not None
            if old_parent != target.id:
                self._name_free(target.id, folder.display_name)
                folder.parent_id = target.id
                for changed in (folder.id, old_parent, target.id):
                    if self.folders[changed].parent_id is not None:  # the root is never listed
                        self._folder_changed(changed)
            return folder

    def delete_folder(self, ref: str) -> None:
        """Delete a user folder with its subfolders and their messages."""
        with self.lock:
            folder = self._user_folder(ref)
            doomed = [folder.id]
            for folder_id in doomed:
                doomed.extend(f.id for f in self.folders.values() if f.parent_id == folder_id)
            for folder_id in doomed:
                for message in [m for m in self.messages.values() if m.folder_id == folder_id]:
                    self._forget(message)
                del self.folders[folder_id]
                self._folder_changed(folder_id, removed=True)
                del self.entries[folder_id]

    def _folder_changed(self, folder_id: str, removed: bool = False) -> None:
        reason = "deleted" if removed else None
        self.folder_changes[folder_id] = Entry(self._tick(), folder_id, folder_id, reason)

    def _user_folder(
        self,
        ref: str,
        code: str = "ErrorDeleteDistinguishedFolder",
        verb: str = "deleted or renamed",
    ) -> Folder:
        folder = self.folder(ref)
        if folder.well_known or folder.parent_id is None:
            raise GraphError(403, code, f"Distinguished folders cannot be {verb}.")
        return folder

    def counts(self, folder: Folder) -> tuple[int, int, int]:
        """(child folders, unread messages, all messages) of a folder."""
        with self.lock:
            kids = sum(1 for f in self.folders.values() if f.parent_id == folder.id)
            inside = [m for m in self.messages.values() if m.folder_id == folder.id]
            return kids, sum(1 for m in inside if not m.is_read), len(inside)

    # -- messages ------------------------------------------------------------

    def message(self, ref: str) -> Message:
        """A message by REST id or immutable id; 404 if neither names one."""
        with self.lock:
            found = self.messages.get(ref) or self.by_immutable.get(ref)
            if found is None:
                raise not_found()
            return found

    def _tick(self) -> int:
        self.seq += 1
        return self.seq

    def _touch(self, message: Message) -> None:
        message.modified = datetime.now(UTC)
        message.change_key = new_id("CQAAAB")
        seq = self._tick()
        self.entries[message.folder_id][message.id] = Entry(seq, message.id, message.immutable_id)

    def _leave(self, message: Message, reason: str) -> None:
        seq = self._tick()
        self.entries[message.folder_id][message.id] = Entry(
            seq, message.id, message.immutable_id, removed=reason
        )

    def _conversation(self, key: str) -> str:
        if not key:
            return new_id("AAQkAGI")
        if key not in self.conversations:
            digest = hashlib.sha256(f"{self.address}\0{key}".encode()).digest()
            tail = base64.urlsafe_b64encode(digest[:18]).decode()
            self.conversations[key] = "AAQkAGI" + tail
        return self.conversations[key]

    def add(
        self,
        raw: bytes,
        folder: str = "inbox",
        *,
        received: datetime | None = None,
        conversation_id: str | None = None,
        is_read: bool = False,
        is_draft: bool = False,
        flag_status: str = "notFlagged",
        categories: tuple[str, ...] | list[str] = (),
    ) -> Message:
        """Deliver a message into ``folder``; the conversation id is derived unless given."""
        with self.lock:
            where = self.folder(folder)
            now = datetime.now(UTC)
            props, key = mime_props.properties(raw, received or now)
            message = Message(
                id=new_id("AAMkAGI"),
                immutable_id=new_id("AAkALgAA"),
                folder_id=where.id,
                raw=raw,
                props=props,
                conversation_id=conversation_id or self._conversation(key),
                created=now,
                modified=now,
                is_read=is_read,
                is_draft=is_draft or where.well_known == "drafts",
                flag_status=flag_status,
                categories=list(categories),
            )
            self.messages[message.id] = message
            self.by_immutable[message.immutable_id] = message
            self._touch(message)
            return message

    def move(self, ref: str, destination: str) -> Message:
        """Move a message; it gets a new REST id (its immutable id stays)."""
        with self.lock:
            message = self.message(ref)
            target = self.folder(destination)
            if target.parent_id is None:
                raise bad_request("Messages cannot be moved to the root folder.")
            self._leave(message, "changed")
            del self.messages[message.id]
            message.id = new_id("AAMkAGI")
            message.folder_id = target.id
            self.messages[message.id] = message
            self._touch(message)
            return message

    def update(
        self,
        ref: str,
        *,
        is_read: bool | None = None,
        flag_status: str | None = None,
        categories: list[str] | None = None,
    ) -> Message:
        """Change read state, flag or categories; a change is seen by the folder's delta."""
        if flag_status is not None and flag_status not in FLAG_STATUSES:
            raise bad_request(f"Unknown flagStatus {flag_status!r}.", "ErrorInvalidArgument")
        with self.lock:
            message = self.message(ref)
            if is_read is not None:
                message.is_read = is_read
            if flag_status is not None:
                message.flag_status = flag_status
            if categories is not None:
                message.categories = list(categories)
            self._touch(message)
            return message

    def delete(self, ref: str, *, permanent: bool = False) -> Message | None:
        """DELETE: to Deleted Items (gone if already there, or if ``permanent``)."""
        with self.lock:
            message = self.message(ref)
            if permanent or message.folder_id == self.aliases["deleteditems"]:
                self._forget(message)
                return None
            return self.move(message.id, "deleteditems")

    def _forget(self, message: Message) -> None:
        self._leave(message, "deleted")
        del self.messages[message.id]
        del self.by_immutable[message.immutable_id]

    # -- rendering -----------------------------------------------------------

    def render_folder(self, folder: Folder) -> dict[str, Any]:
        """A folder in Graph v1.0's shape (no ``wellKnownName``: that is beta only)."""
        kids, unread, total = self.counts(folder)
        return {
            "id": folder.id,
            "displayName": folder.display_name,
            "parentFolderId": folder.parent_id,
            "childFolderCount": kids,
            "unreadItemCount": unread,
            "totalItemCount": total,
            "isHidden": folder.hidden,
        }

    def snapshot(self, message: Message) -> dict[str, Any]:
        """Everything Graph could show of a message now, both ids included (for delta)."""
        with self.lock:
            props = dict(message.props)
            props.update(
                {
                    "@odata.etag": f'W/"{message.change_key}"',
                    "id": message.id,
                    "@immutable": message.immutable_id,
                    "createdDateTime": mime_props.iso(message.created),
                    "lastModifiedDateTime": mime_props.iso(message.modified),
                    "changeKey": message.change_key,
                    "categories": list(message.categories),
                    "parentFolderId": message.folder_id,
                    "conversationId": message.conversation_id,
                    "isRead": message.is_read,
                    "isDraft": message.is_draft,
                    "webLink": f"https://outlook.office365.com/owa/?ItemID={message.id}",
                    "flag": {"flagStatus": message.flag_status},
                    "uniqueBody": props["body"],
                }
            )
            return props

    def render_message(
        self, message: Message, select: tuple[str, ...] = (), immutable: bool = False
    ) -> dict[str, Any]:
        """A message in Graph's shape: every standard property, or ``id`` plus the $select."""
        return show(self.snapshot(message), select, immutable)


def show(snapshot: dict[str, Any], select: tuple[str, ...], immutable: bool) -> dict[str, Any]:
    """A message snapshot as one response shows it: the id form asked for, the $select."""
    shown: dict[str, Any] = {
        "@odata.type": "#microsoft.graph.message",
        "@odata.etag": snapshot["@odata.etag"],
        "id": snapshot["@immutable"] if immutable else snapshot["id"],
    }
    for name in select or ALL_PROPERTIES:
        if name in snapshot and name != "id":
            shown[name] = snapshot[name]
    return shown


def check_select(select: tuple[str, ...]) -> None:
    """400 for a $select naming no message property, as Graph answers."""
    for name in select:
        if name != "id" and name not in ALL_PROPERTIES and name not in SELECT_ONLY:
            raise bad_request(
                f"Could not find a property named '{name}' on type 'microsoft.graph.message'.",
                "RequestBroker--ParseUri",
            )
