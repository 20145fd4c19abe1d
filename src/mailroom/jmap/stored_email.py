"""Storing an email made over JMAP (``Email/import``, ``Email/set`` create) as ingest does.

Contract, the same as :func:`mailroom.ingest.commit.commit_batch` but inside
the JMAP call's transaction (so a failed call undoes its emails, and the
call's ``newState`` sees them):

1. :func:`store_email` stores one :class:`~mailroom.ingest.model.IncomingMessage`
   with :func:`mailroom.ingest.batch.store_batch` (raw blob, bodies, search
   index, change log "created", categories, threading, rules) and its
   keywords (``message_keywords``: every keyword but ``$seen``, which is the
   read state, and ``$flagged``, the Starred label) in a savepoint. When the
   provider id is already stored in that account (``UNIQUE(provider_id,
   account_id)``, also under concurrent calls) the savepoint is rolled back —
   nothing changes — and the answer is None.
2. :func:`queue_append` (for an account whose provider has a propagator)
   adds the pending change ``append`` that carries the stored email to the
   provider (IMAP APPEND, ``providers.imap.append``), woken after commit.
3. :class:`MailboxTargets` checks the ``mailboxIds`` a new email is filed in
   (the user's own mailboxes, ``#creation`` ids resolved, Snoozed refused:
   a snooze needs a wake time; ``$flagged`` adds the Starred label);
   :class:`NewEmails` holds it with the call's context, session, user and
   stored batches, for ``Email/import`` and ``Email/set`` create.
4. :func:`run_steps_after_commit` runs the ingest steps
   (:func:`mailroom.ingest.steps.run_steps`) for the stored batches once the
   call's transaction commits, never on rollback.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event, insert, select
from sqlalchemy.orm import Session

from mailroom.ingest.batch import store_batch
from mailroom.ingest.model import BatchResult, IncomingMessage
from mailroom.ingest.steps import run_steps
from mailroom.jmap import ids
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.errors import Refused
from mailroom.jmap.mapping import role_labels
from mailroom.labels.keywords import FLAGGED, SEEN
from mailroom.labels.operations import Operations
from mailroom.labels.propagation import wake_after_commit
from mailroom.owners import get_or_create_account
from mailroom.providers.imap.append import APPEND
from mailroom.providers.registry import find
from mailroom.store.bulk import insert_ignoring_conflicts
from mailroom.store.models import (
    Account,
    Label,
    Message,
    MessageKeyword,
    PendingChange,
    User,
    utcnow,
)

__all__ = [
    "JMAP_ACCOUNT",
    "JMAP_PROVIDER",
    "InvalidMailboxes",
    "MailboxTargets",
    "NewEmails",
    "created_email",
    "jmap_account",
    "propagates",
    "queue_append",
    "run_steps_after_commit",
    "store_email",
]

# The mail account of a user's emails that came in over JMAP and belong to no
# provider account. No provider is registered as "jmap": nothing syncs it.
JMAP_ACCOUNT = "JMAP"
JMAP_PROVIDER = "jmap"
_STATE_KEYWORDS = frozenset({SEEN, FLAGGED})


class _AlreadyStored(Exception):
    """Raised inside the savepoint to roll it back."""


class InvalidMailboxes(Exception):
    """The ``mailboxIds`` of a new email name no mailbox it can be filed in (why: the text)."""


class MailboxTargets:
    """The mailboxes of a user that a new email (an import, a draft) may be filed in."""

    def __init__(self, session: Session, user_id: int) -> None:
        self.ops = Operations(session, user_id)
        self.own_labels = set(session.scalars(select(Label.id).where(Label.user_id == user_id)))
        self.snoozed = role_labels(session, user_id).get("snoozed")

    def labels(
        self, mailbox_ids: Sequence[str], created_ids: Mapping[str, str], keywords: Iterable[str]
    ) -> list[int]:
        """Label ids in the client's order (Starred last for ``$flagged``), or InvalidMailboxes."""
        resolved = [created_ids.get(m[1:], m) if m.startswith("#") else m for m in mailbox_ids]
        parsed = [ids.parse_mailbox(m) for m in resolved]
        wanted = list(dict.fromkeys(label for label in parsed if label is not None))
        if not mailbox_ids or len(wanted) != len(parsed) or not set(wanted) <= self.own_labels:
            raise InvalidMailboxes(
                "mailboxIds must name at least one existing mailbox of this account."
            )
        if self.snoozed is not None and self.snoozed in wanted:
            raise InvalidMailboxes("Snoozing needs a wake time, which JMAP cannot give.")
        starred = self.ops.role("starred") if FLAGGED in keywords else None
        if starred is not None and starred not in wanted:
            wanted.append(starred)  # $flagged is the Starred label
        return wanted


@dataclass
class NewEmails:
    """What the emails one call stores share: its context and session, the user, the batches."""

    context: Context
    session: Session
    user_id: int
    results: list[BatchResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.targets = MailboxTargets(self.session, self.user_id)

    def store_one(self, obj: object) -> dict[str, Any]:
        """Store one new email; its ``created`` entry, or :class:`Refused` with its SetError."""
        raise NotImplementedError

    def store_all(self, objects: Mapping[str, object]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(created, notCreated) of the objects by creation id; ingest steps run after commit.

        Each created id is kept in the context, so later ``#creation`` references
        of the request resolve to it.
        """
        created: dict[str, Any] = {}
        not_created: dict[str, Any] = {}
        for creation_id, obj in objects.items():
            try:
                created[creation_id] = self.store_one(obj)
            except Refused as refused:
                not_created[creation_id] = refused.error
                continue
            self.context.created_ids[creation_id] = created[creation_id]["id"]
        run_steps_after_commit(self.session, self.results)
        return created, not_created


def jmap_account(session: Session, user_id: int) -> Account:
    """The user's ``JMAP`` mail account, created on first use (race-safe)."""
    user = session.get(User, user_id)
    assert user is not None  # the principal exists
    return get_or_create_account(session, user, JMAP_ACCOUNT, JMAP_PROVIDER)


def store_email(
    session: Session,
    account_id: int,
    user_id: int,
    item: IncomingMessage,
    keywords: Iterable[str],
) -> BatchResult | None:
    """Store one email and its keywords in a savepoint; None if it was stored before."""
    try:
        with session.begin_nested():
            result = store_batch(session, account_id, user_id, [item])
            if not result.created_ids:
                raise _AlreadyStored
            (message_id,) = result.created_ids
            insert_ignoring_conflicts(
                session,
                MessageKeyword,
                [
                    {"message_id": message_id, "keyword": keyword}
                    for keyword in sorted(set(keywords) - _STATE_KEYWORDS)
                ],
            )
    except _AlreadyStored:
        return None
    return result


def propagates(account: Account) -> bool:
    """Whether the account's provider carries local changes to the server (has a propagator)."""
    entry = find(account.provider)
    return entry is not None and entry.propagator is not None


def queue_append(session: Session, account: Account, message_id: int, provider_ref: str) -> None:
    """The pending change ``append`` that carries a stored email to its provider, if it can."""
    if not propagates(account):
        return
    now = utcnow()
    session.execute(
        insert(PendingChange),
        [
            {
                "account_id": account.id,
                "message_id": message_id,
                "provider_id": provider_ref,
                "operation": APPEND,
                "payload": {APPEND: True},
                "state": "pending",
                "attempts": 0,
                "next_attempt_at": now,
                "created_at": now,
            }
        ],
    )
    wake_after_commit(session, {account.id})


def created_email(session: Session, message_id: int) -> dict[str, Any]:
    """What a ``created`` entry says of a new Email: id, blobId, threadId and size."""
    row = session.execute(
        select(Message.thread_id, Message.size).where(Message.id == message_id)
    ).one()
    return {
        "id": ids.email_id(message_id),
        "blobId": ids.raw_blob_id(message_id),
        "threadId": ids.thread_id(row.thread_id, message_id),
        "size": row.size,
    }


def run_steps_after_commit(session: Session, results: list[BatchResult]) -> None:
    """Run the ingest steps for ``results`` once, after the session's transaction commits."""
    pending = list(results)
    if not pending:
        return

    def after_commit(committed: Session) -> None:
        if committed.in_nested_transaction() or not pending:
            return  # a savepoint was released: the transaction may still roll back
        batches = list(pending)
        pending.clear()  # once, even if the session commits again
        for result in batches:
            run_steps(result)

    event.listen(session, "after_commit", after_commit)
