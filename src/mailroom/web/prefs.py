"""What the thread view remembers for a user, in ``users.settings``.

=====================  =====================================================
``mark_read_on_open``  opening a thread marks it read (true when unset)
``images_from``        senders (lower-case addresses) whose remote images
                       are always shown; at most :data:`MAX_SENDERS`, the
                       oldest choice dropped first
=====================  =====================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy.orm import Session

from mailroom.errors import NotFoundError
from mailroom.store.models import User

MAX_SENDERS = 2000


def marks_read_on_open(settings: Mapping[str, Any]) -> bool:
    """Whether opening a thread marks it read for this user."""
    return settings.get("mark_read_on_open", True) is not False


def shows_images_from(settings: Mapping[str, Any], sender: str | None) -> bool:
    """Whether the user always shows remote images of mail from ``sender``."""
    allowed = settings.get("images_from")
    return bool(sender) and isinstance(allowed, list) and (sender or "").lower() in allowed


def allow_images_from(session: Session, user_id: int, sender: str) -> None:
    """Always show the remote images of mail from ``sender`` (idempotent)."""
    user = session.get(User, user_id)
    if user is None:
        raise NotFoundError(f"There is no user {user_id}.")
    settings = dict(user.settings or {})
    allowed = [s for s in settings.get("images_from") or [] if isinstance(s, str)]
    address = sender.strip().lower()
    if address in allowed:
        return
    settings["images_from"] = [*allowed, address][-MAX_SENDERS:]
    user.settings = settings
