"""The ``--smtp-*`` options: an account's outgoing server, given when it is added or updated.

``account add imap``, ``account add local`` and ``account update`` take the same
options (:func:`smtp_options`) and hand them over as one :class:`SmtpOptions`.
The SMTP password is given like the IMAP one — ``--smtp-password-file F`` or
``--smtp-password-stdin``, never on the command line. Without one, an IMAP
account logs in to SMTP with its IMAP password, and with its IMAP login unless
``--smtp-login`` says otherwise (``--smtp-login ''``: no login at all).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from mailroom.cli.context import read_password
from mailroom.config import Settings
from mailroom.errors import ConfigError, NotFoundError
from mailroom.outbound.smtp_settings import SECURITY_MODES, SmtpSettings, check_smtp, set_smtp
from mailroom.store.engine import Store
from mailroom.store.models import Account

__all__ = ["SmtpOptions", "describe", "resolve_outgoing", "save_outgoing", "smtp_options"]


@dataclass(frozen=True)
class SmtpOptions:
    """The ``--smtp-*`` values of one command (None: not given)."""

    host: str | None = None
    port: int | None = None
    security: str | None = None
    login: str | None = None
    password_file: Path | None = None
    password_stdin: bool = False

    @property
    def given(self) -> bool:
        """Whether any ``--smtp-*`` option was given."""
        values = (self.host, self.port, self.security, self.login)
        return self.password_given or any(v is not None for v in values)

    @property
    def password_given(self) -> bool:
        """Whether an SMTP password is to be read."""
        return self.password_file is not None or self.password_stdin

    def password(self, *, stdin_taken: bool = False) -> str | None:
        """The SMTP password from its file or standard input; None when not given."""
        if not self.password_given:
            return None
        if self.password_stdin and stdin_taken:
            raise ConfigError(
                "Only one password can come from standard input; give the SMTP password "
                "with --smtp-password-file."
            )
        return read_password(self.password_file, self.password_stdin)

    def resolve(self, current: SmtpSettings | None, default_login: str | None) -> SmtpSettings:
        """The outgoing server after these options: given values over ``current``'s."""
        host = self.host if self.host is not None else current.host if current else None
        if host is None:
            raise ConfigError("Give the outgoing server with --smtp-host, e.g. smtp.example.org.")
        security = self.security or (current.security if current else "starttls")
        port = self.port
        if port is None and current is not None and current.security == security:
            port = current.port  # a changed security gets its own default port
        login: str | None = self.login
        if login is None:
            login = current.login if current else default_login
        return check_smtp(host, port=port, security=security, login=login)


def resolve_outgoing(
    options: SmtpOptions,
    *,
    current: SmtpSettings | None,
    password: str | None,
    default_login: str | None = None,
    can_log_in: bool = False,
) -> SmtpSettings:
    """The outgoing server these options make, checked; ConfigError in one sentence.

    ``can_log_in``: a password is stored already that SMTP may use (an earlier SMTP
    password, or the IMAP one).
    """
    config = options.resolve(current, default_login)
    if password is not None and config.login is None:
        raise ConfigError("An SMTP password needs an SMTP login (--smtp-login).")
    if config.login and password is None and not can_log_in:
        raise ConfigError(
            f"The SMTP login {config.login!r} needs a password; give it with "
            "--smtp-password-file or --smtp-password-stdin."
        )
    return config


def save_outgoing(
    store: Store, settings: Settings, account_id: int, config: SmtpSettings, password: str | None
) -> None:
    """Store the outgoing server (and a new password, sealed) on the account."""
    with store.session() as session:
        account = session.get(Account, account_id)
        if account is None:
            raise NotFoundError(f"There is no account with id {account_id}.")
        set_smtp(account, config, password, settings)


def describe(config: SmtpSettings) -> str:
    """``smtp.example.org:587 (starttls, login alice)``, for messages."""
    login = f"login {config.login}" if config.login else "no login"
    return f"{config.where} ({config.security}, {login})"


_OPTIONS = (
    click.option("--smtp-host", default=None, help="The outgoing (SMTP) server."),
    click.option(
        "--smtp-port", type=int, default=None, help="Default 465 for tls, 587 for starttls."
    ),
    click.option(
        "--smtp-security",
        type=click.Choice(SECURITY_MODES),
        default=None,
        help="Implicit TLS, STARTTLS (the default), or none (this machine only).",
    ),
    click.option("--smtp-login", default=None, help="The SMTP user name ('' for no login at all)."),
    click.option(
        "--smtp-password-file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Read the SMTP password from the first line of this file.",
    ),
    click.option(
        "--smtp-password-stdin", is_flag=True, help="Read the SMTP password from standard input."
    ),
)


def smtp_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add the ``--smtp-*`` options; the command receives them as ``smtp: SmtpOptions``."""

    @functools.wraps(func)
    def wrapper(
        *args: Any,
        smtp_host: str | None,
        smtp_port: int | None,
        smtp_security: str | None,
        smtp_login: str | None,
        smtp_password_file: Path | None,
        smtp_password_stdin: bool,
        **kwargs: Any,
    ) -> Any:
        smtp = SmtpOptions(
            smtp_host, smtp_port, smtp_security, smtp_login, smtp_password_file, smtp_password_stdin
        )
        return func(*args, smtp=smtp, **kwargs)

    decorated: Callable[..., Any] = wrapper
    for option in reversed(_OPTIONS):
        decorated = option(decorated)
    return decorated
