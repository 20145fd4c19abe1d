"""Writing what Gmail says into the store: its label list, label ids, deletions.

The steps :mod:`.sync` and :mod:`.resync` share, each in its own transaction
or the caller's: read the label list (:func:`read_labels`), mirror the label
ids of stored messages by Gmail id (:func:`store_states`), delete the
messages Gmail deleted forever (:func:`delete_stored`).
"""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from mailroom.ingest.mirror import AccountScope, ChangeSet, delete_orphans, known_messages
from mailroom.providers.gmail.connection import GmailAccount
from mailroom.providers.gmail.labels import load_label_map, sync_labels
from mailroom.providers.gmail.mirror import mirror_states
from mailroom.providers.gmail.skipped import forget_skipped
from mailroom.store.engine import Store

__all__ = ["delete_stored", "read_labels", "store_states"]

LABEL_ATTEMPTS = 3


def read_labels(store: Store, gmail: GmailAccount) -> None:
    """Gmail's label list into the account's labels, bindings and folders.

    Two workers may bind the same new label at once; the one that loses the race
    reads the winner's rows on a second try.
    """
    listed = gmail.api.labels()
    for attempt in range(LABEL_ATTEMPTS):
        try:
            with store.session() as session:
                scope = AccountScope.load(session, gmail.account_id)
                changes = ChangeSet()
                sync_labels(session, scope, changes, listed)
                changes.record(session, scope.user_id)
            return
        except IntegrityError:
            if attempt + 1 == LABEL_ATTEMPTS:
                raise


def store_states(
    session: Session, gmail: GmailAccount, states: dict[str, frozenset[str]]
) -> set[int]:
    """Mirror Gmail label ids of stored messages (by Gmail id); the changed message ids."""
    known = known_messages(session, gmail.account_id, states)
    if not known:
        return set()
    scope = AccountScope.load(session, gmail.account_id)
    changes = ChangeSet()
    labels = load_label_map(session, gmail.account_id, gmail.user_id)
    changed = mirror_states(
        session, scope, changes, labels, {mid: states[gid] for gid, mid in known.items()}
    )
    changes.record(session, scope.user_id)
    return changed


def delete_stored(session: Session, gmail: GmailAccount, gmail_ids: set[str]) -> None:
    known = known_messages(session, gmail.account_id, gmail_ids)
    forget_skipped(session, gmail.account_id, sorted(gmail_ids))
    if known:
        scope = AccountScope.load(session, gmail.account_id)
        delete_orphans(session, scope, ChangeSet(), sorted(known.values()))
