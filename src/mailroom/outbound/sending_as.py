"""Whom a user may send as: their identities, and the one a message is sent with.

A user sends only as their own identities (``identities`` rows: each
account's own address, made on first look by
:func:`mailroom.jmap.identities.sync_identities`, and the identities they
created for its aliases). The submission port checks the envelope sender
and the From and Sender headers against :func:`sending_identities`;
``mailroom send`` picks one with :func:`choose_identity`. The account a
message is queued for is the account of its identity.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.errors import ConfigError, NotFoundError
from mailroom.jmap.identities import identities_of, sync_identities
from mailroom.store.models import Account, Identity, User

__all__ = ["NotYourAddress", "choose_identity", "sending_identities"]


class NotYourAddress(ConfigError):
    """The address is none of the user's identities; ``address`` is the culprit."""

    def __init__(self, address: str) -> None:
        super().__init__(
            f"{address} is not one of your addresses, so mailroom does not send as it."
        )
        self.address = address


def sending_identities(session: Session, user: User) -> dict[str, Identity]:
    """The user's identities that can send, by lower-cased address.

    Of several identities of one address, the account's default wins, then the
    oldest. Identities without an address (an account that names none) are left out.
    """
    sync_identities(session, user.id, user.name)
    found: dict[str, Identity] = {}
    for identity in sorted(
        identities_of(session, user.id, None), key=lambda row: (not row.is_default, row.id)
    ):
        if identity.email:
            found.setdefault(identity.email.lower(), identity)
    return found


def choose_identity(
    session: Session, user: User, *, address: str | None = None, account_name: str | None = None
) -> Identity:
    """The identity to send with: of ``address``, else the default of ``account_name``.

    Without either, the user must have exactly one account to send from. Every
    refusal is one sentence saying what to give instead.
    """
    identities = sending_identities(session, user)
    account = _account(session, user, account_name) if account_name is not None else None
    if address is not None:
        identity = identities.get(address.strip().lower())
        if identity is None:
            raise NotYourAddress(address)
        if account is not None and identity.account_id != account.id:
            raise ConfigError(f"{address} is not an address of the account {account.name!r}.")
        return identity
    defaults = [row for row in identities.values() if row.is_default]
    if account is not None:
        mine = [row for row in defaults if row.account_id == account.id]
        if not mine:
            raise ConfigError(
                f"The account {account.name!r} has no address to send from; "
                "give one of your addresses with --from."
            )
        return mine[0]
    if not defaults:
        raise ConfigError(
            "You have no mail account with an address to send from; "
            "add one with `mailroom account add`."
        )
    if len({row.account_id for row in defaults}) > 1:
        raise ConfigError(
            "You have several accounts to send from; choose one with --account NAME "
            "or an address with --from."
        )
    return defaults[0]


def _account(session: Session, user: User, name: str) -> Account:
    account = session.scalar(
        select(Account).where(Account.user_id == user.id, Account.name == name)
    )
    if account is None:
        raise NotFoundError(f"You have no account called {name!r}; `mailroom accounts` lists them.")
    return account
