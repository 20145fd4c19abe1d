"""Appending an email made in mailroom (a JMAP draft) to a Gmail account over IMAP.

Gmail shows an appended message in All Mail at once, with an ``X-GM-MSGID`` of
its own, and that is where the next sync finds it. So the message is appended
to the folder its labels ask for (``[Gmail]/Drafts`` for a draft, Trash or Spam,
else All Mail), then looked up in All Mail by its Message-ID and size, and the
outcome's ``record`` gives the stored row Gmail's provider id and the All Mail
location: the sync then recognises it instead of storing it a second time.
Its other Gmail-held labels (Inbox, user labels) are set with ``X-GM-LABELS``.

Idempotent: a message already in All Mail with the same Message-ID and size (an
APPEND whose outcome was lost) is taken, not appended again. The Message-ID
searched for comes from the bytes: the stored provider id may be the owner's
keyed hash of it (:mod:`.namer`); the size comes from the id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from mailroom.ingest.mirror import AccountScope, insert_for
from mailroom.labels.resolver import system_label
from mailroom.providers.base import MessageChanges, Outcome
from mailroom.providers.imap.connection import ImapConnection
from mailroom.providers.imap.fetcher import fetch_envelopes
from mailroom.providers.imap.gmail_ext import is_all_mail, msgid_of, search_msgid
from mailroom.providers.imap.gmail_propagate import store_labels
from mailroom.providers.imap.identity import message_id_of_raw, size_of
from mailroom.store.engine import Store
from mailroom.store.models import Folder, Message, MessageLocation

__all__ = ["append_to_gmail"]

# Where a created message goes, by the first of its labels with a Gmail folder.
_PLACES = (("trash", "\\trash"), ("spam", "\\junk"), ("drafts", "\\drafts"))


@dataclass(frozen=True, slots=True)
class _Found:
    """A message found in All Mail."""

    uidvalidity: int
    uid: int
    provider_id: str
    thread_id: str | None


def _folders(session: Session, account_id: int) -> dict[str, Folder]:
    """The account's folders by lower-case special use."""
    return {
        (f.special_use or "").lower(): f
        for f in session.scalars(select(Folder).where(Folder.account_id == account_id))
        if f.special_use
    }


def _in_all_mail(
    conn: ImapConnection,
    path: str,
    provider_ids: Iterable[str],
    mid: str | None,
) -> _Found | None:
    """Where the message is in All Mail and Gmail's ids for it, if it is there.

    By X-GM-MSGID once the row has Gmail's id, else by Message-ID (``mid``, from
    the bytes) and the size the stored id names.
    """
    status = conn.select(path, readonly=True)
    for provider_id in provider_ids:
        msgid = msgid_of(provider_id)
        size = size_of(provider_id)
        if msgid is not None:
            candidates = search_msgid(conn, msgid)
        elif mid is not None and size is not None:
            candidates = conn.search_header("Message-ID", mid)
        else:
            continue
        envelopes, _failed = fetch_envelopes(conn, candidates) if candidates else ({}, {})
        for uid, env in sorted(envelopes.items()):
            if env.gmail is None:
                continue
            if env.gmail.provider_id == provider_id or (env.size == size and env.message_id == mid):
                return _Found(status.uidvalidity, uid, env.gmail.provider_id, env.gmail.thread_id)
    return None


def append_to_gmail(
    conn: ImapConnection,
    store: Store,
    scope: AccountScope,
    pending: MessageChanges,
    provider_id: str,
    raw: bytes,
    flags: Iterable[str],
    labels: frozenset[int],
    received_at: datetime | None = None,
) -> Outcome:
    """Append a created message to Gmail (see the module docstring)."""
    message_id = pending.message_id
    assert message_id is not None
    with store.session() as session:
        folders = _folders(session, scope.account_id)
        target = folders.get("\\all")
        for role, special in _PLACES:
            if system_label(session, scope.user_id, role).id in labels and special in folders:
                target = folders[special]
                break
        all_mail = next((f for f in folders.values() if is_all_mail(f.special_use)), None)
    if target is None or all_mail is None:
        return Outcome.retry(pending, "the Gmail account has no All Mail folder yet")
    ids = (provider_id, pending.provider_id)
    mid = message_id_of_raw(raw)
    found = _in_all_mail(conn, all_mail.path, ids, mid)
    if found is None:
        with conn.guard(f"appending a message to {target.path!r}"):
            conn.client.append(target.path, raw, tuple(flags), received_at)
        found = _in_all_mail(conn, all_mail.path, ids, mid)
    if found is None:
        return Outcome.retry(pending, "the appended message cannot be found in All Mail")
    store_labels(conn, store, message_id, all_mail.path, found.uid, labels)
    folder_id = all_mail.id

    def record(session: Session) -> None:
        """Gmail's id and the All Mail location, in the transaction that marks it done."""
        taken = session.scalar(
            select(Message.id).where(
                Message.account_id == scope.account_id, Message.provider_id == found.provider_id
            )
        )
        if taken is None:
            session.execute(
                update(Message)
                .where(Message.id == message_id)
                .values(provider_id=found.provider_id)
            )
        session.execute(
            update(Message)
            .where(Message.id == message_id, Message.provider_thread_id.is_(None))
            .values(provider_thread_id=found.thread_id)
        )
        session.execute(
            insert_for(session, MessageLocation)
            .values(
                message_id=message_id,
                folder_id=folder_id,
                uidvalidity=found.uidvalidity,
                uid=found.uid,
            )
            .on_conflict_do_nothing()
        )

    return Outcome.done(pending, record)
