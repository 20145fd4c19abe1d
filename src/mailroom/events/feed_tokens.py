"""The secret address of a user's calendar feed: ``/calendar/<token>.ics``.

Calendar programs cannot sign in, so the address itself is the credential,
like Google Calendar's "secret address". Only the token's SHA-256 is stored;
the address is shown once, when it is made, and making a new one is how it
is rotated (the old address stops working at once). Tokens start with
``cal_`` so a leaked one is recognisable.
"""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from mailroom.store.models import CalendarFeed, utcnow

PREFIX = "cal_"
PATH = "/calendar/{token}.ics"


def digest(token: str) -> str:
    """The stored form of a feed token."""
    return hashlib.sha256(token.encode()).hexdigest()


def new_feed_token(session: Session, user_id: int) -> str:
    """Make the user's feed token, replacing any earlier one; returns the token (shown once)."""
    token = PREFIX + secrets.token_urlsafe(32)
    feed = session.get(CalendarFeed, user_id)
    if feed is None:
        session.add(CalendarFeed(user_id=user_id, token_sha256=digest(token), created_at=utcnow()))
    else:
        feed.token_sha256 = digest(token)
        feed.created_at = utcnow()
    session.flush()
    return token


def drop_feed(session: Session, user_id: int) -> bool:
    """Switch the user's feed off (its address stops working); whether there was one."""
    result = session.execute(delete(CalendarFeed).where(CalendarFeed.user_id == user_id))
    return bool(result.rowcount)  # type: ignore[attr-defined]


def feed_user(session: Session, token: str) -> int | None:
    """The user whose feed this token opens, or None."""
    if not token.startswith(PREFIX) or len(token) > 100:
        return None
    return session.scalar(
        select(CalendarFeed.user_id).where(CalendarFeed.token_sha256 == digest(token))
    )


def feed_made_at(session: Session, user_id: int) -> str | None:
    """When the user's current feed address was made (ISO 8601), or None without one."""
    made = session.scalar(select(CalendarFeed.created_at).where(CalendarFeed.user_id == user_id))
    return made.isoformat(timespec="seconds") if made else None


def feed_path(token: str) -> str:
    """The path of the feed (the caller adds the server's base address)."""
    return PATH.format(token=token)
