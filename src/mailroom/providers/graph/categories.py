"""Graph categories as mailroom labels, both ways.

A Graph message has one folder and any number of *categories* (free names).
mailroom holds both as labels: the folder's label (bound through the folder
row) and one user label per category, named by the category (``Work/Tax`` is
the label ``Tax`` under ``Work``, the convention folders use too).

The labels a message's categories stand for (:func:`category_held`) are its
user labels (no system role) that are not folder labels of the account, so
the two never fight over a label:

* **Graph → mailroom** (:func:`mirror_categories`): a delta item reports the
  message's full ``categories``; its category-held labels become exactly those.
  A category naming a system folder ("Inbox") or a folder of the account is
  not a category label and is left out. A message with a pending local change
  keeps its labels (pending local changes win), so an older Graph view does
  not undo a label just added in mailroom.
* **mailroom → Graph** (:func:`category_names`): the propagator's ``PATCH``
  carries the full ``categories`` array derived from the message's current
  category-held labels, so replaying it changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.ingest.mirror import AccountScope, ChangeSet, pending_messages, replace_labels
from mailroom.labels.resolver import resolve_path
from mailroom.store.chunks import in_chunks
from mailroom.store.models import Label, MessageLabel

__all__ = ["category_held", "category_label", "category_names", "mirror_categories"]

SEPARATOR = "/"


def category_label(session: Session, scope: AccountScope, name: str) -> int | None:
    """The user label a category stands for (created as needed), or None if it cannot be one."""
    parts = [part for part in name.split(SEPARATOR) if part.strip()]
    if not parts:
        return None
    label = resolve_path(session, scope.user_id, parts)
    if label.role is not None or label.id in scope.folder_labels.values():
        return None  # a system label or a folder's: the folder decides those
    return label.id


def category_held(
    session: Session, scope: AccountScope, message_ids: Iterable[int]
) -> dict[int, dict[int, str]]:
    """message id → {label id: label path} of the labels its categories stand for."""
    folder_labels = set(scope.folder_labels.values())
    held: dict[int, dict[int, str]] = {}
    for chunk in in_chunks(sorted(set(message_ids))):
        rows = session.execute(
            select(MessageLabel.message_id, Label.id, Label.path)
            .join(Label, Label.id == MessageLabel.label_id)
            .where(MessageLabel.message_id.in_(chunk), Label.role.is_(None))
        )
        for message_id, label_id, path in rows:
            if label_id not in folder_labels:
                held.setdefault(message_id, {})[label_id] = path
    return held


def category_names(session: Session, scope: AccountScope, message_id: int) -> tuple[str, ...]:
    """The categories Graph should hold for a message (sorted, so replays send the same)."""
    return tuple(sorted(category_held(session, scope, [message_id]).get(message_id, {}).values()))


def mirror_categories(
    session: Session,
    scope: AccountScope,
    changes: ChangeSet,
    reported: Mapping[int, Iterable[str]],
) -> set[int]:
    """Make each message's category labels the reported categories; returns the changed ids."""
    free = sorted(set(reported) - pending_messages(session, reported))
    if not free:
        return set()
    current = category_held(session, scope, free)
    changed: set[int] = set()
    for message_id in free:
        wanted = {
            label_id
            for name in reported[message_id]
            if (label_id := category_label(session, scope, name)) is not None
        }
        have = set(current.get(message_id, {}))
        if replace_labels(session, changes, message_id, have, wanted):
            changed.add(message_id)
    return changed
