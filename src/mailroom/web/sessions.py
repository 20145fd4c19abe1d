"""Web sessions: the server side of the sign-in cookie.

A session is a random token (32 bytes, URL-safe) handed to the browser in an
HttpOnly, SameSite=Lax cookie (Secure under https); the store keeps only its
SHA-256, the user, a per-session CSRF token for the session's forms, and
when it was made, last seen and ends. Because the session lives in the
store, not in a signed cookie, there is no signing secret to keep, every
HTTP process of a store sees the same sessions, and signing out (deleting
the row) ends the session at once even if someone copied the cookie.

Sessions end ``lifetime`` after sign-in (no sliding renewal, so a stolen
cookie has a bounded life); ended rows are deleted whenever someone signs in
and by the hourly duty of ``mailroom serve`` (:func:`prune_sessions`).
``last_seen_at`` is written at most every 10 minutes, for a later session list.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from mailroom.store.engine import Store
from mailroom.store.models import User, WebSession, utcnow

DEFAULT_LIFETIME = timedelta(days=30)
_TOUCH = timedelta(minutes=10)


@dataclass(frozen=True, slots=True)
class SignedIn:
    """The signed-in user of a request, and the CSRF token its forms must carry."""

    session_id: int
    user_id: int
    name: str
    csrf_token: str


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def start_session(
    store: Store,
    user_id: int,
    user_agent: str = "",
    lifetime: timedelta = DEFAULT_LIFETIME,
    now: datetime | None = None,
) -> str:
    """A new session of ``user_id``; the cookie value (shown only here)."""
    now = now or utcnow()
    token = secrets.token_urlsafe(32)
    with store.session() as session:
        _delete_ended(session, now)
        session.add(
            WebSession(
                user_id=user_id,
                token_sha256=_digest(token),
                csrf_token=secrets.token_urlsafe(32),
                user_agent=user_agent,
                created_at=now,
                last_seen_at=now,
                expires_at=now + lifetime,
            )
        )
    return token


def prune_sessions(store: Store, now: datetime | None = None) -> int:
    """Delete the sessions that have ended; how many."""
    with store.session() as session:
        return _delete_ended(session, now or utcnow())


def _delete_ended(session: Session, now: datetime) -> int:
    result = session.execute(delete(WebSession).where(WebSession.expires_at <= now))
    return int(result.rowcount)  # type: ignore[attr-defined]


def find_session(store: Store, token: str | None, now: datetime | None = None) -> SignedIn | None:
    """The live session a cookie value names, or None (missing, unknown or expired)."""
    if not token:
        return None
    now = now or utcnow()
    with store.session() as session:
        row = session.execute(
            select(
                WebSession.id,
                WebSession.csrf_token,
                WebSession.last_seen_at,
                User.id.label("user_id"),
                User.name,
            )
            .join(User, User.id == WebSession.user_id)
            .where(WebSession.token_sha256 == _digest(token), WebSession.expires_at > now)
        ).first()
        if row is None:
            return None
        if now - row.last_seen_at > _TOUCH:
            session.execute(
                update(WebSession).where(WebSession.id == row.id).values(last_seen_at=now)
            )
    return SignedIn(row.id, row.user_id, row.name, row.csrf_token)


def end_session(store: Store, session_id: int, signed_out: SignOut | None = None) -> None:
    """End a session: its cookie opens nothing any more (idempotent).

    With ``signed_out`` (the user pressed "Sign out") the end is audited as ``signout``
    in the same transaction; a session replaced by a new sign-in is not.
    """
    with store.session() as session:
        session.execute(delete(WebSession).where(WebSession.id == session_id))
        if signed_out is not None:
            from mailroom.audit.log import Origin, record

            record(
                session,
                "signout",
                user_name=signed_out.user.name,
                user_id=signed_out.user.user_id,
                origin=Origin.network("web", signed_out.address),
            )


@dataclass(frozen=True)
class SignOut:
    """Who pressed "Sign out", and from which client address (for the audit log)."""

    user: SignedIn
    address: str | None
