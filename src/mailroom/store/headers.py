"""Reading the stored header lists of messages (``message_bodies.headers``, opened when sealed)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy.orm import Session

from mailroom.crypto.mail_reading import columns_of


def stored_headers(session: Session, message_ids: Collection[int]) -> dict[int, Any]:
    """Message id → its stored (name, value) header pairs, for the ids that have a body row."""
    if not message_ids:
        return {}
    found = columns_of(session, message_ids, ["headers"])
    return {message_id: columns["headers"] for message_id, columns in found.items()}
