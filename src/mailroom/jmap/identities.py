"""The identities of a user: kept in ``identities``, one default per mail account.

Each account's own address (its ``email`` setting, else its ``login`` or
``username`` when that is an address) gets its default identity
(``is_default``) the first time anyone looks (:func:`sync_identities`),
named after the account's ``display_name`` setting or the user. A default
identity cannot be deleted; when the account's address changes, the old
default becomes an ordinary identity and a new default is made. Further
identities may be created for any address the user's accounts own (their
own addresses and those in an account's ``aliases`` setting), several for
one address too. An account without an address has a default identity with
an empty email, so every account is visible; it cannot be used to send. The
per-user ``JMAP`` account (Email/import's, provider ``jmap``) has no address
and sends nothing, so it has no identity.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from mailroom.jmap.stored_email import JMAP_PROVIDER
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


def user_accounts(session: Session, user_id: int) -> dict[int, Account]:
    """The user's mail accounts that can have identities (all but the JMAP one), by id."""
    rows = session.scalars(
        select(Account)
        .where(Account.user_id == user_id, Account.provider != JMAP_PROVIDER)
        .order_by(Account.id)
    )
    return {account.id: account for account in rows}


def _replace_default(
    session: Session, user_id: int, account: Account, name: str, old: Identity | None
) -> None:
    """Make the account's address its default identity; ``old`` (another address) is demoted.

    The partial unique index on the default of an account refuses a second
    one, so of two requests doing this at once one wins and the other's
    savepoint is rolled back.
    """
    settings = account.settings or {}
    try:
        with session.begin_nested():
            if old is not None:
                old.is_default = False
                session.flush()
                changelog.record(session, user_id, TYPE, [old.id], "updated")
            row = Identity(
                user_id=user_id,
                account_id=account.id,
                email=account_address(account),
                is_default=True,
                name=str(settings.get("display_name") or name),
                text_signature="",
                html_signature="",
            )
            session.add(row)
            session.flush()
            changelog.record(session, user_id, TYPE, [row.id], "created")
    except IntegrityError:  # another request made the default at the same moment
        if old is not None:
            session.refresh(old)


def sync_identities(session: Session, user_id: int, user_name: str) -> dict[int, Account]:
    """Give each of the user's accounts its default identity; the accounts by id."""
    accounts = user_accounts(session, user_id)
    defaults = {
        row.account_id: row
        for row in session.scalars(
            select(Identity).where(Identity.user_id == user_id, Identity.is_default)
        )
    }
    for account in accounts.values():
        current = defaults.get(account.id)
        if current is None or current.email.lower() != account_address(account).lower():
            _replace_default(session, user_id, account, user_name, current)
    return accounts


def identities_of(session: Session, user_id: int, wanted: Iterable[int] | None) -> list[Identity]:
    """The user's identities (all, or those of ``wanted`` ids), oldest first.

    Identities of the JMAP account (made before it was left out) are not offered.
    """
    query = (
        select(Identity)
        .join(Account, Account.id == Identity.account_id)
        .where(Identity.user_id == user_id, Account.provider != JMAP_PROVIDER)
        .order_by(Identity.id)
    )
    if wanted is not None:
        query = query.where(Identity.id.in_(list(wanted)))
    return list(session.scalars(query))
