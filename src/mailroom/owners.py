"""Users and accounts: finding or creating the owner and the account of an import."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, object_session

from mailroom.audit import Origin, record_account
from mailroom.config import DEFAULT_OWNER as DEFAULT_OWNER  # re-exported
from mailroom.errors import NotFoundError, unknown_user
from mailroom.store.models import Account, User


def get_or_create_user(session: Session, name: str = DEFAULT_OWNER) -> User:
    """The user called ``name``, created on first use (race-safe)."""
    user = session.scalar(select(User).where(User.name == name))
    if user is not None:
        return user
    try:
        with session.begin_nested():
            user = User(name=name)
            session.add(user)
    except IntegrityError:
        user = session.scalars(select(User).where(User.name == name)).one()
    return user


def get_user(session: Session, name: str) -> User:
    """The user called ``name`` or a NotFoundError in plain words."""
    user = session.scalar(select(User).where(User.name == name))
    if user is None:
        raise unknown_user(name)
    return user


def get_account(session: Session, owner: str, name: str) -> Account:
    """The account ``name`` of the user ``owner``, or a NotFoundError in plain words."""
    user = get_user(session, owner)
    account = session.scalar(
        select(Account).where(Account.user_id == user.id, Account.name == name)
    )
    if account is None:
        raise NotFoundError(f"{owner!r} has no account called {name!r}.")
    return account


def get_or_create_account(
    session: Session, user: User, name: str, provider: str, settings: dict[str, Any] | None = None
) -> Account:
    """The account ``name`` of ``user``, created with ``provider`` on first use."""
    account = session.scalar(
        select(Account).where(Account.user_id == user.id, Account.name == name)
    )
    if account is not None:
        return account
    try:
        with session.begin_nested():
            account = Account(
                user_id=user.id, name=name, provider=provider, settings=settings or {}
            )
            session.add(account)
    except IntegrityError:
        account = session.scalars(
            select(Account).where(Account.user_id == user.id, Account.name == name)
        ).one()
    return account


def disconnect_account(account: Account, origin: Origin | None = None) -> None:
    """Stop syncing ``account`` and forget its passwords; its mail stays (idempotent).

    Audited (``account.disconnect``) in the account's session when it was connected.
    """
    session = object_session(account)
    if session is not None and account.status != "disconnected":
        record_account(session, "account.disconnect", account, origin)
    account.status = "disconnected"
    account.status_reason = "disconnected by the owner"
    account.secret = None
    account.smtp_secret = None
    account.watch_state = "idle"
