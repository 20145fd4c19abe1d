"""The identities of a user: one per mail-account address, kept in ``identities``.

Each account's own address (its ``email`` setting, else its ``login`` or
``username`` when that is an address) gets an identity row the first time
anyone looks (:func:`sync_identities`), named after the account's
``display_name`` setting or the user. Those default identities cannot be
deleted; further identities may be created for any address the user's
accounts own: their own addresses and those in an account's ``aliases``
setting. An account without an address has one identity with an empty email,
so every account is visible; it cannot be used to send.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from mailroom.store import changelog
from mailroom.store.models import Account, Identity

TYPE = "Identity"


def account_address(account: Account) -> str:
    """The address an account sends as, or "" when its settings name none."""
    settings = account.settings or {}
    for key in ("email", "login", "username"):
        value = str(settings.get(key) or "")
        if "@" in value:
            return value
    return ""


def owned_addresses(account: Account) -> list[str]:
    """Every address of the account: its own, then its ``aliases`` setting."""
    aliases = (account.settings or {}).get("aliases") or []
    found = [account_address(account)]
    if isinstance(aliases, list):
        found.extend(str(a) for a in aliases if isinstance(a, str) and "@" in a)
    return [address for address in found if address]


def is_default(identity: Identity, accounts: dict[int, Account]) -> bool:
    """Whether the identity is its account's own address (which cannot be deleted)."""
    account = accounts.get(identity.account_id)
    return account is not None and account_address(account).lower() == identity.email.lower()


def user_accounts(session: Session, user_id: int) -> dict[int, Account]:
    """The user's mail accounts by id."""
    rows = session.scalars(select(Account).where(Account.user_id == user_id).order_by(Account.id))
    return {account.id: account for account in rows}


def _create_default(session: Session, user_id: int, account: Account, name: str) -> None:
    settings = account.settings or {}
    try:
        with session.begin_nested():
            row = Identity(
                user_id=user_id,
                account_id=account.id,
                email=account_address(account),
                name=str(settings.get("display_name") or name),
                text_signature="",
                html_signature="",
            )
            session.add(row)
            session.flush()
            changelog.record(session, user_id, TYPE, [row.id], "created")
    except IntegrityError:  # another request created it at the same moment
        pass


def sync_identities(session: Session, user_id: int, user_name: str) -> dict[int, Account]:
    """Create the missing default identities of the user's accounts; the accounts by id."""
    accounts = user_accounts(session, user_id)
    have = {
        (account_id, email.lower())
        for account_id, email in session.execute(
            select(Identity.account_id, Identity.email).where(Identity.user_id == user_id)
        )
    }
    for account in accounts.values():
        if (account.id, account_address(account).lower()) not in have:
            _create_default(session, user_id, account, user_name)
    return accounts


def identities_of(session: Session, user_id: int, wanted: Iterable[int] | None) -> list[Identity]:
    """The user's identities (all, or those of ``wanted`` ids), oldest first."""
    query = select(Identity).where(Identity.user_id == user_id).order_by(Identity.id)
    if wanted is not None:
        query = query.where(Identity.id.in_(list(wanted)))
    return list(session.scalars(query))
