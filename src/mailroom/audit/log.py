"""Writing the audit log: the actions it knows and where an action came from.

What is recorded (the names in :data:`ACTIONS`):

* ``signin.ok`` / ``signin.failed`` / ``signin.locked``: a password checked
  (web page, JMAP Basic, SMTP submission) — right, wrong, or the failure that
  started a lock-out. A JMAP client repeating already verified Basic
  credentials is not recorded again (the check is cached in process), nor is
  each refusal during a lock-out (its start is): an attacker must not be
  able to grow the log without bound. A failed name that is no user is
  recorded without the name, which is sometimes a mistyped password.
* ``signout``: a web session ended by its user's "Sign out".
* ``token.create`` / ``token.revoke``, ``user.create`` / ``user.password`` /
  ``user.delete``, ``account.add`` / ``account.disconnect`` /
  ``account.remove``, ``key.init`` / ``key.rotate``, ``backup.create`` /
  ``backup.restore``.

``account.remove`` has no code calling it yet: it is named here so the code
that will remove an account for good records under that name.
"""

from __future__ import annotations

import getpass
import socket
from dataclasses import dataclass

from sqlalchemy.orm import Session

from mailroom.store.models.audit import AuditEntry
from mailroom.store.models.users import Account, User

ACTIONS = frozenset(
    {
        "signin.ok",
        "signin.failed",
        "signin.locked",
        "signout",
        "token.create",
        "token.revoke",
        "user.create",
        "user.password",
        "user.delete",
        "account.add",
        "account.disconnect",
        "account.remove",
        "key.init",
        "key.rotate",
        "backup.create",
        "backup.restore",
    }
)

CHANNELS = frozenset({"web", "jmap", "smtp", "cli"})


@dataclass(frozen=True, slots=True)
class Origin:
    """How an action came (``via``) and from where (a client address, or a command's user)."""

    via: str
    where: str | None

    @classmethod
    def cli(cls) -> Origin:
        """A command run on this machine: the OS user and the host name."""
        try:
            user = getpass.getuser()
        except (KeyError, OSError):  # no name for this uid (a bare container)
            user = "unknown"
        return cls("cli", f"{user}@{socket.gethostname()}")

    @classmethod
    def network(cls, via: str, address: str | None) -> Origin:
        """A request over ``via`` (web, jmap, smtp) from the client ``address``."""
        return cls(via, address)


def record(
    session: Session,
    action: str,
    *,
    user_name: str | None = None,
    user_id: int | None = None,
    origin: Origin | None = None,
    detail: str = "",
) -> None:
    """Add one audit row to ``session``: it commits or rolls back with the action.

    ``origin`` None means a command on this machine (:meth:`Origin.cli`).
    """
    if action not in ACTIONS:
        raise ValueError(f"unknown audit action {action!r}")
    origin = origin or Origin.cli()
    if origin.via not in CHANNELS:
        raise ValueError(f"unknown audit channel {origin.via!r}")
    session.add(
        AuditEntry(
            action=action,
            user_name=user_name,
            user_id=user_id,
            via=origin.via,
            origin=origin.where,
            detail=detail,
        )
    )


def record_account(
    session: Session, action: str, account: Account, origin: Origin | None = None
) -> None:
    """Audit ``action`` on ``account`` (flushed, so it has an id) for its owner."""
    owner = session.get(User, account.user_id)
    record(
        session,
        action,
        user_name=owner.name if owner is not None else None,
        user_id=account.user_id,
        origin=origin,
        detail=f"{account.provider} account {account.name!r} (id {account.id})",
    )
