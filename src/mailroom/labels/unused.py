"""Removing user labels nothing uses any more, when a provider's folder or label is gone.

A label is still used while a binding, a folder, a message, a thread or a child
label refers to it. System labels (those with a role) are never removed. A
removed label's parent is looked at next, so a chain left empty goes as a whole.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from mailroom.store.models import Folder, Label, LabelBinding, MessageLabel, ThreadLabel

__all__ = ["drop_unused_labels"]


def drop_unused_labels(session: Session, label_ids: Iterable[int]) -> None:
    """Delete those of ``label_ids`` (and then their parents) that nothing uses any more."""
    todo = set(label_ids)
    while todo:
        label = session.get(Label, todo.pop())
        if label is None or label.role is not None:
            continue
        used = session.scalar(
            select(
                exists().where(LabelBinding.label_id == label.id)
                | exists().where(Folder.label_id == label.id)
                | exists().where(MessageLabel.label_id == label.id)
                | exists().where(ThreadLabel.label_id == label.id)
                | exists().where(Label.parent_id == label.id)
            )
        )
        if used:
            continue
        parent = label.parent_id
        session.delete(label)
        session.flush()
        if parent is not None:
            todo.add(parent)
