"""Opening the IMAP connection of a stored account, and recording what the login said.

The first sync decides whether an account's credentials work: a refused login
(or a blocked host) turns the account's status to ``auth_error`` with the
operator's reason (:func:`~mailroom.providers.errors.account_outcome`), and the
error is raised; a later successful login returns it to ``active`` and clears
the reason. A transient failure or a missing master key leaves the status alone
but records why. A ``disconnected`` account is never contacted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import update

from mailroom.config import Settings, load_settings
from mailroom.errors import ConfigError, ProviderError
from mailroom.providers.base import AuthError, TransientError
from mailroom.providers.errors import account_outcome
from mailroom.providers.imap.account import account_password, load_account
from mailroom.providers.imap.connection import DEFAULT_TIMEOUT, ImapConnection, connect
from mailroom.store.engine import Store
from mailroom.store.models import Account

__all__ = ["account_connection", "open_connection", "set_status"]


def set_status(store: Store, account_id: int, status: str, reason: str | None) -> None:
    """Record the account's status and its reason (one short transaction)."""
    with store.session() as session:
        session.execute(
            update(Account)
            .where(Account.id == account_id)
            .values(status=status, status_reason=reason[:500] if reason else None)
        )


def open_connection(
    store: Store,
    account_id: int,
    *,
    settings: Settings | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> ImapConnection:
    """Log in to the account's server (the caller closes the connection)."""
    settings = settings or load_settings()
    with store.session() as session:
        account, config = load_account(session, account_id)
        if account.status == "disconnected":
            raise ProviderError(
                f"The account {account.name!r} is disconnected; add it again to sync it."
            )
        status, reason = account.status, account.status_reason
    try:
        password = account_password(account, settings)  # the row's fields are loaded
    except ConfigError as exc:  # no master key, or the wrong one: the operator must act
        set_status(store, account_id, status, str(exc))
        raise
    try:
        conn = connect(
            config, password, allowed_hosts=settings.allowed_private_host_list, timeout=timeout
        )
    except (AuthError, TransientError) as exc:
        # The operator's reason (what is really wrong) is kept with the status.
        outcome = account_outcome(exc)
        set_status(store, account_id, outcome.status or status, outcome.reason)
        raise
    if status != "active" or reason is not None:
        set_status(store, account_id, "active", None)
    return conn


@contextmanager
def account_connection(
    store: Store,
    account_id: int,
    *,
    settings: Settings | None = None,
    connection: ImapConnection | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Iterator[ImapConnection]:
    """A logged-in connection for the account (the given one if it is still open)."""
    if connection is not None and not connection.closed:
        yield connection
        return
    conn = open_connection(store, account_id, settings=settings, timeout=timeout)
    try:
        yield conn
    finally:
        conn.close()
