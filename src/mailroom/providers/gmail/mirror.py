"""Mirroring what Gmail says of stored messages: their label ids, read and starred state.

Gmail keeps a message once; its label ids are the whole truth about it. For
each stored message :func:`mirror_states` makes

* its *held* labels (:attr:`LabelMap.held`: every label bound to a Gmail label
  of the account, plus Archive) equal to what its Gmail label ids stand for;
  labels kept only in mailroom (Snoozed, labels never bound) are not touched;
* *seen* follow ``UNREAD`` and *starred* follow ``STARRED``
  (:func:`mailroom.ingest.mirror.apply_flags`);
* its tab follow its ``CATEGORY_*`` label: when a message's category label
  changed, the cascade runs again from stored data and only the threads whose
  tab changed are announced (SPEC §5).

A message with a pending local change keeps everything until the change has
reached Gmail ("pending local changes win"). No body is fetched here.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from mailroom.categories.recompute import recategorize
from mailroom.ingest.mirror import (
    AccountScope,
    ChangeSet,
    Flags,
    apply_flags,
    insert_for,
    pending_messages,
)
from mailroom.providers.gmail.labels import STARRED, UNREAD, LabelMap
from mailroom.store.chunks import in_chunks
from mailroom.store.models import MessageLabel

__all__ = ["flags_of", "mirror_states"]

INSERT_ROWS = 500  # label rows per INSERT, well under any bind-parameter limit


def flags_of(gmail_ids: frozenset[str]) -> Flags:
    """Seen and starred as Gmail's label ids say."""
    return Flags(seen=UNREAD not in gmail_ids, starred=STARRED in gmail_ids)


def mirror_states(
    session: Session,
    scope: AccountScope,
    changes: ChangeSet,
    labels: LabelMap,
    states: Mapping[int, frozenset[str]],
) -> set[int]:
    """Make each message's held labels, flags and tab follow its Gmail label ids."""
    pending = pending_messages(session, states)
    free = sorted(m for m in states if m not in pending)
    held = sorted(labels.held)
    current: dict[int, set[int]] = {m: set() for m in free}
    for chunk in in_chunks(free):
        for message_id, label_id in session.execute(
            select(MessageLabel.message_id, MessageLabel.label_id).where(
                MessageLabel.message_id.in_(chunk), MessageLabel.label_id.in_(held)
            )
        ):
            current[message_id].add(label_id)
    added: list[dict[str, int]] = []
    removed: dict[int, set[int]] = {}  # label id -> the messages losing it
    changed: set[int] = set()
    recategorized: set[int] = set()
    for message_id in free:
        wanted = labels.labels_for(states[message_id])
        moved = wanted ^ current[message_id]
        if not moved:
            continue
        changed.add(message_id)
        changes.mailboxes.update(moved)
        if moved & labels.categories:
            recategorized.add(message_id)
        added += [{"message_id": message_id, "label_id": x} for x in sorted(moved & wanted)]
        for label_id in moved - wanted:
            removed.setdefault(label_id, set()).add(message_id)
    for start in range(0, len(added), INSERT_ROWS):
        rows = added[start : start + INSERT_ROWS]
        session.execute(insert_for(session, MessageLabel).values(rows).on_conflict_do_nothing())
    for label_id, losing in removed.items():
        for chunk in in_chunks(sorted(losing)):
            session.execute(
                delete(MessageLabel).where(
                    MessageLabel.label_id == label_id, MessageLabel.message_id.in_(chunk)
                )
            )
    changes.emails.update(changed)
    changed |= apply_flags(
        session,
        scope,
        changes,
        {m: flags_of(states[m]) for m in free},
        pending=pending,
    )
    if recategorized:
        session.flush()
        recategorize(session, scope.user_id, recategorized)  # announces changed tabs itself
    return changed
