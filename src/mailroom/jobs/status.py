"""Recording why an account does not sync: its status, the reason, and one log line.

Jobs and the supervisor meet the same failures again and again (every poll, every
watcher restart). A failure that needs a person — refused credentials, a blocked
host, no master key — must not print a traceback each time, nor hide in a debug
log: the account's ``status_reason`` says what is wrong (``mailroom accounts``
shows it) and the log says it once per account, until the reason changes.
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy import select, update

from mailroom.providers.errors import account_outcome
from mailroom.store.engine import Store
from mailroom.store.models import Account

log = logging.getLogger(__name__)

_REASON_LENGTH = 500  # Account.status_reason

_logged: dict[tuple[str, int], str] = {}
_lock = threading.Lock()


def _key(store: Store, account_id: int) -> tuple[str, int]:
    return (store.engine.url.render_as_string(hide_password=True), account_id)


def record_failure(
    store: Store, account_id: int, error: BaseException, *, watch_state: str | None = None
) -> str:
    """Store the failure's status and reason on the account; log it once. Returns the reason."""
    outcome = account_outcome(error)
    reason = outcome.reason[:_REASON_LENGTH]
    values: dict[str, object] = {"status_reason": reason}
    if outcome.status is not None:
        values["status"] = outcome.status
    if watch_state is not None:
        values["watch_state"] = watch_state
    with store.session() as session:
        session.execute(
            update(Account)
            .where(Account.id == account_id, Account.status != "disconnected")
            .values(**values)
        )
        name = session.scalar(select(Account.name).where(Account.id == account_id))
    with _lock:
        first = _logged.get(_key(store, account_id)) != reason
        _logged[_key(store, account_id)] = reason
    if first:
        log.warning("Account %r (id %s) does not sync: %s", name, account_id, reason)
    return reason


def clear_failure(store: Store, account_id: int) -> None:
    """The account synced: forget a recorded reason (a later failure is logged again)."""
    with _lock:
        _logged.pop(_key(store, account_id), None)
    with store.session() as session:
        session.execute(
            update(Account)
            .where(
                Account.id == account_id,
                Account.status == "active",
                Account.status_reason.is_not(None),
            )
            .values(status_reason=None)
        )
