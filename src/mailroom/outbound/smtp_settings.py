"""An account's outgoing server: where it is, how the connection is secured, who logs in.

``Account.settings["smtp"]`` holds ``{"host", "port", "security", "login"}``:

* ``security`` is ``tls`` (implicit TLS, port 465 by default, RFC 8314),
  ``starttls`` (port 587, RFC 3207/6409) or ``none`` — unencrypted, allowed only
  to this machine (``localhost``, ``127.0.0.0/8``, ``::1``), because a password or
  a message sent in the clear over a network can be read on the way;
* ``login`` is the user name for AUTH; ``None`` sends without logging in.

The password is in ``Account.smtp_secret``, sealed by :class:`~mailroom.secrets.SecretBox`
with the associated data ``account:<id>:smtp``. An IMAP account without a separate
SMTP password logs in with its IMAP password (most providers use one password for
both). Checking the values is offline; the first send talks to the server.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.secrets import SecretBox
from mailroom.store.models import Account

__all__ = [
    "DEFAULT_PORTS",
    "SECURITY_MODES",
    "SmtpSettings",
    "can_log_in",
    "check_smtp",
    "clear_smtp",
    "incoming_login",
    "is_loopback",
    "set_smtp",
    "smtp_password",
    "smtp_settings",
]

SECURITY_MODES: Final = ("tls", "starttls", "none")
DEFAULT_PORTS: Final = {"tls": 465, "starttls": 587, "none": 25}
_IMAP_PROVIDER: Final = "imap"  # whose Account.secret is a password SMTP may fall back to


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine: ``localhost`` or a loopback address."""
    name = host.strip().lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class SmtpSettings:
    """How to reach and log in to one account's outgoing server (the password is separate)."""

    host: str
    port: int
    security: str
    login: str | None = None

    def as_settings(self) -> dict[str, Any]:
        """The JSON stored in ``Account.settings["smtp"]``."""
        return {
            "host": self.host,
            "port": self.port,
            "security": self.security,
            "login": self.login,
        }

    @property
    def where(self) -> str:
        """``host:port``, for messages."""
        return f"{self.host}:{self.port}"


def check_smtp(
    host: str, *, port: int | None = None, security: str = "starttls", login: str | None = None
) -> SmtpSettings:
    """Validate what an owner typed; ConfigError in one sentence for a bad value.

    An empty ``login`` means no AUTH. Unencrypted SMTP to another machine is refused.
    """
    host = host.strip()
    if not host or any(ch.isspace() for ch in host) or "/" in host:
        raise ConfigError(
            f"{host!r} is not a host name; give the outgoing server, e.g. smtp.example.org."
        )
    if security not in SECURITY_MODES:
        raise ConfigError(
            f"The SMTP security must be one of {', '.join(SECURITY_MODES)}, not {security!r}."
        )
    if port is not None and not 1 <= port <= 65535:
        raise ConfigError(f"The SMTP port {port} is not a TCP port (1-65535).")
    if security == "none" and not is_loopback(host):
        raise ConfigError(
            f"Unencrypted SMTP is only allowed to this machine, not to {host}; "
            "use --smtp-security tls or starttls."
        )
    login = login.strip() if login else None
    return SmtpSettings(host, port or DEFAULT_PORTS[security], security, login or None)


def smtp_settings(account: Account) -> SmtpSettings | None:
    """The account's outgoing server, or None when it has none; ConfigError if damaged."""
    stored = (account.settings or {}).get("smtp")
    if not stored:
        return None
    try:
        if not isinstance(stored, Mapping):
            raise TypeError
        port = stored.get("port")
        return check_smtp(
            str(stored["host"]),
            port=int(port) if port is not None else None,
            security=str(stored.get("security", "starttls")),
            login=str(stored["login"]) if stored.get("login") else None,
        )
    except (KeyError, TypeError, ValueError, ConfigError):
        raise ConfigError(
            f"The outgoing server settings of the account {account.name!r} are damaged; set "
            f"them again with `mailroom account update {account.name} --smtp-host HOST`."
        ) from None


def _context(account: Account) -> str:
    return f"account:{account.id}:smtp"


def set_smtp(
    account: Account, config: SmtpSettings, password: str | None, settings: Settings
) -> None:
    """Store the outgoing server on a flushed account; seal ``password`` when one is given.

    ``password`` None keeps a password stored before (or falls back to the IMAP one).
    """
    if password is not None and not password:
        raise ConfigError("The SMTP password is empty; give a password of at least one character.")
    box = SecretBox.from_settings(settings) if password else None  # fail before changing
    account.settings = {**(account.settings or {}), "smtp": config.as_settings()}
    if box is not None and password:
        account.smtp_secret = box.seal(password.encode("utf-8"), _context(account))


def clear_smtp(account: Account) -> None:
    """Forget the outgoing server and its password."""
    account.settings = {k: v for k, v in (account.settings or {}).items() if k != "smtp"}
    account.smtp_secret = None


def incoming_login(account: Account) -> str | None:
    """The login SMTP uses when none was given: an IMAP account's own."""
    login = (account.settings or {}).get("login")
    return str(login) if account.provider == _IMAP_PROVIDER and login else None


def can_log_in(account: Account) -> bool:
    """Whether a password SMTP may use is stored: its own, or an IMAP account's."""
    return bool(account.smtp_secret) or (
        account.provider == _IMAP_PROVIDER and bool(account.secret)
    )


def smtp_password(account: Account, settings: Settings) -> str | None:
    """The password for AUTH: the sealed SMTP one, else an IMAP account's own; None if neither."""
    if account.smtp_secret:
        box = SecretBox.from_settings(settings)
        return box.open(account.smtp_secret, _context(account)).decode("utf-8")
    if account.provider == _IMAP_PROVIDER and account.secret:
        box = SecretBox.from_settings(settings)
        return box.open(account.secret, f"account:{account.id}").decode("utf-8")
    return None
