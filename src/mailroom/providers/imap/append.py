"""Appending an email made in mailroom (a JMAP draft) to its IMAP account.

An email created over JMAP (``jmap.methods.email_create``) is stored with no
location and one pending change ``append``. The propagator hands such a
message to :func:`append_unplaced` first; for every other message, and for
this one once it has a location, it returns None and the usual per-message
propagation applies. The steps, each safe to repeat:

1. the target folder: the Drafts folder when the email carries the Drafts
   label, else the folder of its first location label (Inbox, Sent, Archive,
   Trash, Spam, then a user label bound to a folder), else Archive, else
   INBOX. When nothing is known the folders are discovered first, and a
   draft in an account without a Drafts folder gets one (CREATE ``Drafts``;
   discovery binds it to the Drafts label);
2. **idempotent**: the target folder is searched for the Message-ID first; a
   message there with the same provider id (an APPEND whose outcome was lost)
   is bound, not appended again;
3. APPEND of the stored raw bytes with the flags of its state (``\\Seen``,
   ``\\Flagged``, and each keyword's flag: ``$draft`` is ``\\Draft``) and
   its ``receivedAt`` as INTERNALDATE;
4. the new UID (APPENDUID, else a search by Message-ID) becomes the message's
   location in the transaction that marks the changes done (the outcome's
   ``record``). The next sync sees a message it already knows: its provider
   id is the IMAP one (``mid:<Message-ID>:<size>``, or its keyed form for an
   owner whose mail is sealed: :mod:`.namer`), so nothing is stored twice.

The Message-ID searched for comes from the stored bytes, never from the
provider id (a keyed id cannot be read back).

Gmail (``X-GM-EXT-1``) is different: the message must end up with Gmail's id and
its All Mail location (:mod:`.gmail_append`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from mailroom.crypto.mail_reading import open_blob
from mailroom.ingest.mirror import AccountScope, ChangeSet, insert_for
from mailroom.labels.keywords import stored_keywords
from mailroom.labels.resolver import system_label
from mailroom.providers.base import MessageChanges, Outcome
from mailroom.providers.imap.connection import CommandError, ImapConnection
from mailroom.providers.imap.discovery import discover, folder_role, syncable
from mailroom.providers.imap.fetcher import fetch_envelopes
from mailroom.providers.imap.gmail_append import append_to_gmail
from mailroom.providers.imap.gmail_ext import speaks_gmail
from mailroom.providers.imap.identity import message_id_of_raw
from mailroom.providers.imap.mirror import flag_of
from mailroom.providers.imap.namer import ImapNamer
from mailroom.store.engine import Store
from mailroom.store.models import Blob, Folder, Message, MessageLabel, MessageLocation

__all__ = ["APPEND", "DRAFTS_FOLDER", "append_unplaced"]

APPEND = "append"  # the operation of the pending change (``jmap.methods.email_create``)
DRAFTS_FOLDER = "Drafts"
# The roles whose folder holds a created email, in order of preference.
_PLACES = ("drafts", "inbox", "sent", "archive", "trash", "spam")
_APPENDUID = re.compile(rb"\[APPENDUID (\d+) (\d+)\]", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class _Draft:
    """What the APPEND needs of the stored message (plain values, no ORM object)."""

    message_id: int
    provider_id: str
    raw: bytes
    flags: tuple[str, ...]
    received_at: datetime
    labels: frozenset[int]
    namer: ImapNamer  # the owner's: how the provider id was made

    @property
    def header_id(self) -> str | None:
        """The clear Message-ID of the bytes (what the server searches)."""
        return message_id_of_raw(self.raw)


def append_unplaced(
    conn: ImapConnection, store: Store, scope: AccountScope, pending: MessageChanges
) -> Outcome | None:
    """Append a created message that has no location yet; None when it is not one."""
    if pending.message_id is None or not any(e.operation == APPEND for e in pending.entries):
        return None
    with store.session() as session:
        draft = _load(session, scope, pending.message_id)
        if draft is None:
            return None
        folder = _target(session, scope, draft.labels)
    if speaks_gmail(conn):
        return append_to_gmail(
            conn,
            store,
            scope,
            pending,
            draft.provider_id,
            draft.raw,
            draft.flags,
            draft.labels,
            draft.received_at,
        )
    if folder is None:
        folder = _discovered_target(conn, store, scope, draft.labels)
    if folder is None:
        return Outcome.retry(pending, "the account has no folder to append the message to")
    folder_id, path = folder
    placed = _find(conn, path, draft) or _append(conn, path, draft)

    def record(session: Session) -> None:
        """The new location, in the transaction that marks the changes done."""
        validity, uid = placed
        session.execute(
            insert_for(session, MessageLocation)
            .values(message_id=draft.message_id, folder_id=folder_id, uidvalidity=validity, uid=uid)
            .on_conflict_do_nothing()
        )

    return Outcome.done(pending, record)


def _load(session: Session, scope: AccountScope, message_id: int) -> _Draft | None:
    """The message to append, or None when it is gone or already has a location."""
    placed = exists().where(MessageLocation.message_id == message_id)
    row = session.execute(
        select(
            Message.provider_id,
            Message.seen_at,
            Message.received_at,
            Blob.sha256,
            Blob.data,
            Blob.user_id,
        )
        .join(Blob, Blob.sha256 == Message.raw_sha256)
        .where(Message.id == message_id, Message.account_id == scope.account_id, ~placed)
    ).one_or_none()
    if row is None:
        return None
    labels = frozenset(
        session.scalars(select(MessageLabel.label_id).where(MessageLabel.message_id == message_id))
    )
    flags: list[str] = [r"\Seen"] if row.seen_at is not None else []
    if scope.starred_label in labels:
        flags.append(r"\Flagged")
    flags.extend(
        flag_of(k) for k in sorted(stored_keywords(session, [message_id]).get(message_id, ()))
    )
    return _Draft(
        message_id,
        row.provider_id,
        open_blob(session, row.sha256, row.data, row.user_id) or b"",
        tuple(flags),
        row.received_at,
        labels,
        ImapNamer.of(session, scope.user_id),
    )


def _target(
    session: Session, scope: AccountScope, labels: frozenset[int]
) -> tuple[int, str] | None:
    """(folder id, path) the message goes to (module docstring, step 1), or None."""
    folders = [
        f
        for f in session.scalars(select(Folder).where(Folder.account_id == scope.account_id))
        if syncable(f)
    ]
    by_label: dict[int, tuple[int, str]] = {}
    # The special-use (or named) folder of a label first, as the propagator's layout does.
    for folder in sorted(folders, key=lambda f: (_role(f) is None, len(f.path))):
        if folder.label_id is not None:
            by_label.setdefault(folder.label_id, (folder.id, folder.path))
    roles = {role: system_label(session, scope.user_id, role).id for role in _PLACES}
    ordered = [roles[r] for r in _PLACES if roles[r] in labels]
    ordered.extend(sorted(label for label in labels if label not in roles.values()))
    for label in ordered:
        if label in by_label:
            return by_label[label]
    if roles["drafts"] in labels:
        return None  # a draft waits for a Drafts folder rather than landing elsewhere
    if roles["archive"] in by_label:
        return by_label[roles["archive"]]
    inbox = next((f for f in folders if f.path.upper() == "INBOX"), None)
    return (inbox.id, inbox.path) if inbox is not None else None


def _role(folder: Folder) -> str | None:
    return folder_role(folder.path, folder.delimiter, folder.special_use)


def _discovered_target(
    conn: ImapConnection, store: Store, scope: AccountScope, labels: frozenset[int]
) -> tuple[int, str] | None:
    """The target after folder discovery; a draft's Drafts folder is created if still missing."""
    for create in (False, True):
        with store.session() as session:
            is_draft = system_label(session, scope.user_id, "drafts").id in labels
        if create and not is_draft:
            return None
        if create:
            conn.create_folder(DRAFTS_FOLDER)
        with store.session() as session:
            changes = ChangeSet()
            discover(session, conn, scope, changes)
            changes.record(session, scope.user_id)
            folder = _target(session, scope, labels)
        if folder is not None:
            return folder
    return None


def _find(conn: ImapConnection, path: str, draft: _Draft) -> tuple[int, int] | None:
    """(UIDVALIDITY, UID) of this very message already in the folder, if it is there."""
    mid = draft.header_id
    if mid is None:
        return None
    status = conn.select(path, readonly=True)
    candidates = conn.search_header("Message-ID", mid)
    if not candidates:
        return None
    envelopes, _failed = fetch_envelopes(conn, candidates)
    uids = sorted(
        uid for uid, env in envelopes.items() if draft.provider_id in env.provider_ids(draft.namer)
    )
    return (status.uidvalidity, uids[0]) if uids else None


def _append(conn: ImapConnection, path: str, draft: _Draft) -> tuple[int, int]:
    """APPEND the message; its (UIDVALIDITY, UID) from APPENDUID or a search after it."""
    with conn.guard(f"appending a message to {path!r}"):
        response = conn.client.append(path, draft.raw, draft.flags, draft.received_at)
    found = _APPENDUID.search(response if isinstance(response, bytes) else str(response).encode())
    if found is not None:
        return int(found.group(1)), int(found.group(2))
    placed = _find(conn, path, draft)
    if placed is None:
        raise CommandError(f"The appended message cannot be found in {path!r}.")
    return placed
