"""An IMAP account: where the server is, who logs in, and the sealed password.

Connecting is fast and offline: ``add_imap_account`` checks the values a user
typed, encrypts the password under the master key and stores the account; it
does not talk to the server. The first sync decides — a refused login turns the
account's status to ``auth_error`` with a plain reason.

``Account.settings`` holds ``{"host", "port", "tls", "login"}``; ``Account.secret``
holds the password sealed by :class:`mailroom.secrets.SecretBox` and bound to
``account:<id>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.audit import Origin, record_account
from mailroom.config import Settings
from mailroom.errors import ConfigError, NotFoundError
from mailroom.labels.resolver import ensure_system_labels
from mailroom.owners import get_or_create_user
from mailroom.secrets import SecretBox
from mailroom.store.engine import Store
from mailroom.store.models import Account, User

__all__ = ["PROVIDER", "TLS_MODES", "ImapConfig", "add_imap_account", "load_account"]

PROVIDER = "imap"
TLS_MODES = ("ssl", "starttls", "none")
DEFAULT_PORTS = {"ssl": 993, "starttls": 143, "none": 143}


@dataclass(frozen=True, slots=True)
class ImapConfig:
    """How to reach and log in to one IMAP account (the password is separate)."""

    host: str
    port: int
    tls: str
    login: str

    def as_settings(self) -> dict[str, Any]:
        """The JSON stored in ``Account.settings``."""
        return {"host": self.host, "port": self.port, "tls": self.tls, "login": self.login}

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> ImapConfig:
        """Read back ``Account.settings``; ConfigError if it is incomplete."""
        try:
            tls = str(settings.get("tls", "ssl"))
            return cls(
                host=str(settings["host"]),
                port=int(settings.get("port") or DEFAULT_PORTS.get(tls, 993)),
                tls=tls,
                login=str(settings["login"]),
            )
        except (KeyError, TypeError, ValueError):
            raise ConfigError(
                "This IMAP account is missing its host or login; add it again."
            ) from None


def _check(name: str, host: str, port: int | None, tls: str, login: str) -> ImapConfig:
    if not name.strip():
        raise ConfigError("The account needs a name (--name).")
    host = host.strip()
    if not host or any(ch.isspace() for ch in host) or "/" in host:
        raise ConfigError(
            f"{host!r} is not a host name; give the server name, e.g. imap.example.org."
        )
    if tls not in TLS_MODES:
        raise ConfigError(f"--tls must be one of {', '.join(TLS_MODES)}, not {tls!r}.")
    if port is not None and not 1 <= port <= 65535:
        raise ConfigError(f"The port {port} is not a TCP port (1-65535).")
    if not login.strip():
        raise ConfigError("The account needs a login (--login).")
    return ImapConfig(host=host, port=port or DEFAULT_PORTS[tls], tls=tls, login=login.strip())


def add_imap_account(
    store: Store,
    settings: Settings,
    *,
    name: str,
    host: str,
    login: str,
    password: str,
    port: int | None = None,
    tls: str = "ssl",
    owner: str = "me",
    origin: Origin | None = None,
) -> int:
    """Store a new IMAP account with its sealed password; returns the account id.

    Audited (``account.add``, from ``origin``; None: this machine's command line).

    Offline: nothing is sent to the server. Raises ConfigError for bad values, a
    missing master key or a name that is already taken.
    """
    config = _check(name, host, port, tls, login)
    if not password:
        raise ConfigError(
            "The password is empty; give it with --password-file or --password-stdin."
        )
    box = SecretBox.from_settings(settings)  # fail before writing anything
    with store.session() as session:
        user = get_or_create_user(session, owner)
        taken = session.scalar(
            select(Account.id).where(Account.user_id == user.id, Account.name == name.strip())
        )
        if taken is not None:
            raise ConfigError(
                f"{owner!r} already has an account called {name.strip()!r}; choose another name."
            )
        account = Account(
            user_id=user.id,
            name=name.strip(),
            provider=PROVIDER,
            settings=config.as_settings(),
            status="active",
            watch_state="idle",
        )
        session.add(account)
        session.flush()
        account.secret = box.seal(password.encode("utf-8"), f"account:{account.id}")
        ensure_system_labels(session, user.id)
        record_account(session, "account.add", account, origin)
        return account.id


def load_account(session: Session, account_id: int) -> tuple[Account, ImapConfig]:
    """The account row and its IMAP configuration; NotFoundError if it is not IMAP."""
    account = session.get(Account, account_id)
    if account is None or account.provider != PROVIDER:
        raise NotFoundError(f"There is no IMAP account with id {account_id}.")
    return account, ImapConfig.from_settings(account.settings or {})


def account_password(account: Account, settings: Settings) -> str:
    """Decrypt the account's password; ConfigError when it is missing or the key is wrong."""
    if not account.secret:
        raise ConfigError(f"The account {account.name!r} has no stored password; add it again.")
    box = SecretBox.from_settings(settings)
    return box.open(account.secret, f"account:{account.id}").decode("utf-8")


def owner_name(session: Session, account: Account) -> str:
    """The name of the user owning the account."""
    return session.scalar(select(User.name).where(User.id == account.user_id)) or ""
