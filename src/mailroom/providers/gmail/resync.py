"""After the history expired: the stored messages' labels read again, without their bodies.

When ``history.list`` answers 404 the changes since the last sync are lost.
What the store holds is brought back in step with listings alone: one
``messages.list`` walk of the whole mailbox (spam and trash included) tells
which stored messages still exist, and one walk per label the account knows
(plus ``STARRED`` and ``UNREAD``) tells which messages carry it. 500 ids cost
5 units per page, so this is far cheaper than fetching messages again.

Stored messages Gmail no longer lists are deleted; the others get the label
ids the walks found (:func:`.changes.store_states`). Messages Gmail has and the
store does not are the backfill's, which starts over.
"""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy import select

from mailroom.providers.gmail.changes import delete_stored, store_states
from mailroom.providers.gmail.connection import GmailAccount
from mailroom.providers.gmail.labels import STARRED, UNREAD
from mailroom.store.engine import Store
from mailroom.store.models import LabelBinding, Message

__all__ = ["resync_labels"]


def resync_labels(store: Store, gmail: GmailAccount) -> None:
    """Make the stored messages' labels and existence Gmail's again (see the module)."""
    with store.session() as session:
        stored = set(
            session.scalars(
                select(Message.provider_id).where(Message.account_id == gmail.account_id)
            )
        )
        bound = sorted(
            set(
                session.scalars(
                    select(LabelBinding.provider_ref).where(
                        LabelBinding.account_id == gmail.account_id
                    )
                )
            )
        )
    if not stored:
        return
    existing = {str(ref["id"]) for ref in gmail.api.iter_messages(include_spam_trash=True)} & stored
    states: dict[str, set[str]] = defaultdict(set)
    for gmail_label in [*bound, STARRED, UNREAD]:
        for ref in gmail.api.iter_messages(label_ids=[gmail_label], include_spam_trash=True):
            if str(ref["id"]) in existing:
                states[str(ref["id"])].add(gmail_label)
    with store.session() as session:
        gone = stored - existing
        if gone:
            delete_stored(session, gmail, gone)
        store_states(session, gmail, {gid: frozenset(states[gid]) for gid in existing})
