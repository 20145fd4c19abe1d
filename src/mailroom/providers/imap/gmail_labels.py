"""Gmail labels (``X-GM-LABELS``) as mailroom labels, and mirroring them into the store.

============== ===================================================================
Gmail label    mailroom
============== ===================================================================
``\\Inbox``     the Inbox label
``\\Sent``      the Sent label
``\\Draft``     the Drafts label
``\\Starred``   the Starred label — through the ``\\Flagged`` flag Gmail keeps in step
``\\Important`` no label; handed to the pipeline as the provider label ``IMPORTANT``
``Work/Tax``   the user label ``Work/Tax`` (a parent chain, as its label folder gets)
============== ===================================================================

Spam and Trash are places, not labels: the folder a message is located in gives
them (the mirror of locations). A message in All Mail with none of the labels
above is archived: it carries the Archive label, which it drops again as soon
as it has one (the same rule the operations keep).

Mirroring (:func:`mirror_labels`) makes a message's *Gmail-held* labels — Inbox,
Sent, Drafts, Archive and user labels — equal to what Gmail reports. Other
labels (Starred, Snoozed, Trash, Spam) are left to their own mechanisms, and a
message with a pending local change keeps its labels until the change reached
Gmail ("pending local changes win").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from mailroom.ingest.mirror import AccountScope, ChangeSet, pending_messages, replace_labels
from mailroom.labels.resolver import system_label
from mailroom.providers.imap.discovery import folder_label
from mailroom.store.chunks import in_chunks
from mailroom.store.models import Label, MessageLabel

__all__ = ["MANAGED_ROLES", "label_ids", "mirror_labels", "provider_labels"]

DELIMITER = "/"
SYSTEM_ROLES = {"\\inbox": "inbox", "\\sent": "sent", "\\draft": "drafts"}
API_NAMES = {
    "\\inbox": "INBOX",
    "\\sent": "SENT",
    "\\draft": "DRAFT",
    "\\starred": "STARRED",
    "\\important": "IMPORTANT",
}
_ARCHIVED = ""  # the cache's key for the Archive label (no Gmail label is empty)
# The roles whose labels Gmail's label set decides (besides every user label).
MANAGED_ROLES = frozenset({"inbox", "sent", "drafts", "archive"})


def label_ids(
    session: Session,
    user_id: int,
    labels: Iterable[str],
    *,
    in_all_mail: bool,
    known: dict[str, int | None] | None = None,
) -> set[int]:
    """The mailroom labels Gmail's labels stand for (created as needed).

    ``known``: Gmail label -> label id (None: no label) already looked up, to be
    shared by the calls of one page; it is filled in as labels are looked up.
    """
    cache: dict[str, int | None] = {} if known is None else known
    found: set[int] = set()
    for label in labels:
        if label not in cache:
            cache[label] = _label_id(session, user_id, label)
        label_id = cache[label]
        if label_id is not None:
            found.add(label_id)
    if in_all_mail and not found:
        archive = cache.get(_ARCHIVED)
        if archive is None:
            archive = cache[_ARCHIVED] = system_label(session, user_id, "archive").id
        found.add(archive)
    return found


def _label_id(session: Session, user_id: int, label: str) -> int | None:
    lower = label.lower()
    if lower.startswith("\\"):
        role = SYSTEM_ROLES.get(lower)
        return system_label(session, user_id, role).id if role is not None else None
    if not label.strip(DELIMITER).strip():
        return None
    return folder_label(session, user_id, label, DELIMITER)


def provider_labels(labels: Iterable[str]) -> list[str]:
    """Gmail's labels as the pipeline knows them (the Gmail API's ids for system labels)."""
    return sorted(API_NAMES.get(label.lower(), label) for label in labels)


def mirror_labels(
    session: Session, scope: AccountScope, changes: ChangeSet, wanted: Mapping[int, set[int]]
) -> set[int]:
    """Make each message's Gmail-held labels the given ones; returns the changed messages."""
    pending = pending_messages(session, wanted)
    free = sorted(m for m in wanted if m not in pending)
    held = or_(Label.role.is_(None), Label.role.in_(MANAGED_ROLES))
    current: dict[int, set[int]] = {m: set() for m in free}
    for chunk in in_chunks(free):
        rows = session.execute(
            select(MessageLabel.message_id, MessageLabel.label_id)
            .join(Label, Label.id == MessageLabel.label_id)
            .where(MessageLabel.message_id.in_(chunk), held)
        )
        for message_id, label_id in rows:
            current[message_id].add(label_id)
    return {
        message_id
        for message_id in free
        if replace_labels(session, changes, message_id, current[message_id], wanted[message_id])
    }
