"""How mailroom's model appears in JMAP: label roles as mailbox roles, state as keywords.

================ ================== =========================================
mailroom role    JMAP mailbox role  keyword
================ ================== =========================================
inbox            inbox
sent             sent
drafts           drafts
archive          archive
spam             junk
trash            trash
snoozed          snoozed
starred          flagged            ``$flagged`` (the Starred label)
(seen_at)                           ``$seen``
================ ================== =========================================

Every other keyword (``$draft`` included: it is independent of the Drafts
mailbox) is a ``message_keywords`` row; see :mod:`mailroom.labels.keywords`.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.labels.resolver import SYSTEM_SORT_ORDER
from mailroom.store.models import Label

JMAP_ROLE = {
    "inbox": "inbox",
    "sent": "sent",
    "drafts": "drafts",
    "archive": "archive",
    "spam": "junk",
    "trash": "trash",
    "snoozed": "snoozed",
    "starred": "flagged",
}
MAILROOM_ROLE = {jmap: ours for ours, jmap in JMAP_ROLE.items()}

# The system mailboxes' usual order, which their stored sortOrder also follows.
SORT_ORDER = SYSTEM_SORT_ORDER
USER_LABEL_SORT_ORDER = 100


def role_labels(session: Session, user_id: int) -> dict[str, int]:
    """The user's system labels by mailroom role (without creating any)."""
    rows = session.execute(
        select(Label.role, Label.id).where(Label.user_id == user_id, Label.role.is_not(None))
    )
    return {role: label_id for role, label_id in rows if role}
