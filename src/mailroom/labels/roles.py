"""The system labels: each role and the name a new user's label of that role gets."""

from __future__ import annotations

SYSTEM_LABELS: dict[str, str] = {
    "inbox": "Inbox",
    "sent": "Sent",
    "drafts": "Drafts",
    "archive": "Archive",
    "spam": "Spam",
    "trash": "Trash",
    "snoozed": "Snoozed",
    "starred": "Starred",
}
