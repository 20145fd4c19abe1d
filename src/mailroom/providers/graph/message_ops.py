"""What Graph should hold of one message, derived from its current state in mailroom.

Never from the operation names, so a replay changes nothing (SPEC §2):

* ``isRead`` follows ``seen_at``, the flag follows the Starred label, and
  ``categories`` (the full array) follow its category labels (:mod:`.categories`);
* Graph keeps a message in one folder, so its folder is the folder of a label
  it carries: the folder it is in, while it still carries that folder's label;
  otherwise the folder of a folder label the pending changes added (a move to
  Archive, Junk or Deleted Items, or to a user folder), else of any folder label
  it carries, else (every folder label taken off: archived) the Archive folder.

:func:`plan_message` reads that from the store as plain values.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.ingest.mirror import AccountScope
from mailroom.labels.resolver import system_label
from mailroom.providers.base import MessageChanges
from mailroom.providers.graph.categories import category_names
from mailroom.providers.graph.folders import graph_id
from mailroom.store.models import Folder, Message, MessageLabel, MessageLocation

__all__ = ["MessagePlan", "plan_message"]


@dataclass(frozen=True, slots=True)
class MessagePlan:
    """One message: where it is at Graph and what Graph should hold."""

    message_id: int
    graph_id: str  # its id in the folder it is located in
    folder_id: int  # the folder row it is located in
    target_folder: int  # the folder row it should be in
    target_graph_folder: str  # that folder's Graph id
    seen: bool
    starred: bool
    categories: tuple[str, ...] = ()

    @property
    def moves(self) -> bool:
        """Whether the message must move to another folder."""
        return self.target_folder != self.folder_id


def plan_message(
    session: Session, account_id: int, user_id: int, changes: MessageChanges
) -> MessagePlan | None:
    """The plan for a message, or None when it has no known place at Graph yet."""
    assert changes.message_id is not None
    mid = changes.message_id
    folders = {
        f.id: f for f in session.scalars(select(Folder).where(Folder.account_id == account_id))
    }
    location = session.execute(
        select(MessageLocation.folder_id, MessageLocation.provider_ref)
        .where(MessageLocation.message_id == mid, MessageLocation.folder_id.in_(list(folders)))
        .limit(1)
    ).one_or_none()
    if location is None or not location.provider_ref:
        return None
    labels = set(
        session.scalars(select(MessageLabel.label_id).where(MessageLabel.message_id == mid))
    )
    by_label = {f.label_id: f for f in folders.values() if f.label_id is not None and graph_id(f)}
    here = folders[location.folder_id]
    target = here
    if here.label_id not in labels:
        added = [by_label[x] for x in sorted(changes.added_labels & labels) if x in by_label]
        carried = [by_label[x] for x in sorted(labels) if x in by_label]
        archive = [f for f in folders.values() if f.special_use == "archive"]
        choices = added or carried or archive
        target = choices[0] if choices else here
    seen_at = session.scalar(select(Message.seen_at).where(Message.id == mid))
    scope = AccountScope(
        account_id=account_id,
        user_id=user_id,
        starred_label=system_label(session, user_id, "starred").id,
        folder_labels={f.id: f.label_id for f in folders.values() if f.label_id is not None},
    )
    return MessagePlan(
        message_id=mid,
        graph_id=str(location.provider_ref),
        folder_id=here.id,
        target_folder=target.id,
        target_graph_folder=graph_id(target),
        seen=seen_at is not None,
        starred=scope.starred_label in labels,
        categories=category_names(session, scope, mid),
    )
