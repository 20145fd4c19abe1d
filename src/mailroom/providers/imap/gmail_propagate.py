"""Carrying mailroom's changes to Gmail over IMAP: labels by ``X-GM-LABELS``, places by moves.

A Gmail message lives in exactly one of All Mail, Spam and Trash
(:func:`home_folder`): Trash when it carries the Trash label, else Spam when it
carries Spam, else All Mail. The propagator moves it there like any IMAP
message (MOVE with COPYUID). Its labels are then set on the All Mail copy with
``UID STORE +X-GM-LABELS`` / ``-X-GM-LABELS`` (:func:`store_labels`):

* only the labels the pending operations named are touched (a label another
  client added that no sync has read yet is left alone), and each is made to
  match the message's current labels (idempotent: replaying changes nothing);
* Inbox is ``\\Inbox``; a user label is its full name (``Work/Invoices``), which
  Gmail creates when it does not exist yet; Sent, Drafts, Starred (a flag),
  Archive (no label at Gmail) and Snoozed (mailroom's own) are not sent.

Deleting forever (:func:`delete_forever`) finds the message by ``X-GM-MSGID``,
moves it to Trash and expunges it there — expunging from All Mail would only
trash it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from sqlalchemy import select

from mailroom.providers.base import MessageChanges
from mailroom.providers.imap.connection import ImapConnection
from mailroom.providers.imap.gmail_ext import LABELS_ITEM, labels_of, search_msgid
from mailroom.store.engine import Store
from mailroom.store.models import Label, MessageLabel

__all__ = ["delete_forever", "home_folder", "labels_named", "store_labels"]

log = logging.getLogger(__name__)

INBOX = "\\Inbox"


def home_folder(
    labels: set[int],
    roles: Mapping[str, int],
    folder_for_role: Callable[[str], int | None],
    all_mail: int | None,
) -> set[int]:
    """The one folder a Gmail message should be in (see the module docstring)."""
    for role in ("trash", "spam"):
        folder = folder_for_role(role)
        if roles[role] in labels and folder is not None:
            return {folder}
    return {all_mail} if all_mail is not None else set()


def labels_named(pending: MessageChanges) -> set[int]:
    """The labels the pending operations added or removed."""
    return {
        int(x)
        for e in pending.entries
        for key in ("add", "remove")
        for x in e.payload.get(key) or []
    }


def _gmail_names(
    store: Store, message_id: int, named: Iterable[int]
) -> tuple[dict[int, str], set[int]]:
    """Gmail's name of each named label Gmail holds, and the message's current labels."""
    with store.session() as session:
        names: dict[int, str] = {}
        for label in session.scalars(select(Label).where(Label.id.in_(sorted(set(named))))):
            if label.role == "inbox":
                names[label.id] = INBOX
            elif label.role is None:
                names[label.id] = label.path
        current = set(
            session.scalars(
                select(MessageLabel.label_id).where(MessageLabel.message_id == message_id)
            )
        )
    return names, current


def _same(a: str, b: str) -> bool:
    return a.lower() == b.lower() if a.startswith("\\") else a == b


def store_labels(
    conn: ImapConnection,
    store: Store,
    message_id: int,
    all_mail_path: str,
    uid: int,
    named: Iterable[int],
) -> int:
    """Make the All Mail copy's Gmail labels match the named labels; returns the labels changed."""
    names, labels = _gmail_names(store, message_id, named)
    if not names:
        return 0
    conn.ensure_selected(all_mail_path, readonly=False)
    data = conn.fetch(str(uid), ("UID", LABELS_ITEM))
    if uid not in data:
        return 0  # gone behind our back: the next sync finds where it went
    server = labels_of(data[uid]) or ()

    def on_server(name: str) -> bool:
        return any(_same(name, other) for other in server)

    add = [name for label, name in names.items() if label in labels and not on_server(name)]
    remove = [name for label, name in names.items() if label not in labels and on_server(name)]
    with conn.guard("changing Gmail labels"):
        if add:
            conn.client.add_gmail_labels([uid], add, silent=True)
        if remove:
            conn.client.remove_gmail_labels([uid], remove, silent=True)
    return len(add) + len(remove)


def delete_forever(
    conn: ImapConnection, folders: Iterable[str], trash_path: str | None, msgid: int
) -> int:
    """Delete the message with this X-GM-MSGID for good; returns the copies expunged."""
    if trash_path is None:
        log.warning("The Gmail account has no Trash folder; message %x is only archived", msgid)
    for path in folders:
        if path == trash_path:
            continue
        conn.select(path, readonly=False)
        hits = search_msgid(conn, msgid)
        if hits and trash_path is not None:
            conn.move(hits, trash_path)
    if trash_path is None:
        return 0
    conn.select(trash_path, readonly=False)
    hits = search_msgid(conn, msgid)
    if hits:
        conn.expunge(hits)
    return len(hits)
