"""Which transport sends an account's mail: its own SMTP server, or its provider's API.

* An account with outgoing settings (``Account.settings["smtp"]``, set by
  ``mailroom account add ... --smtp-host`` or ``account update``) sends through
  :class:`~mailroom.outbound.smtp.SmtpTransport` — whatever its provider, so an
  owner may route any account through a server of their choice.
* Otherwise a factory registered for the account's provider builds one
  (``register_transport("gmail", ...)`` for Gmail API send, ``"graph"`` for Graph
  sendMail: filled by the issues that bring those providers).
* Otherwise the account cannot send, said in one sentence naming the command that fixes it.

A transport keeps a connection; whoever asks for one closes it (``close()``).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

from sqlalchemy.orm import Session

from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.outbound.base import Transport
from mailroom.outbound.smtp import DEFAULT_TIMEOUT, SmtpTransport
from mailroom.outbound.smtp_settings import smtp_password, smtp_settings
from mailroom.providers import registry
from mailroom.store.models import Account

__all__ = ["TransportFactory", "register_transport", "registered_providers", "transport_for"]

TransportFactory = Callable[[Session, Account, Settings], Transport]

_FACTORIES: dict[str, TransportFactory] = {}


def register_transport(provider: str, factory: TransportFactory) -> None:
    """Let accounts of ``provider`` without SMTP settings send through ``factory``."""
    _FACTORIES[provider] = factory


def registered_providers() -> list[str]:
    """The providers that bring their own transport."""
    return sorted(_FACTORIES)


def transport_for(
    session: Session,
    account: Account,
    settings: Settings,
    *,
    ssl_context: ssl.SSLContext | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Transport:
    """The transport for ``account``; ConfigError when it has none or cannot log in.

    ``ssl_context`` replaces the system trust store (tests trusting their own
    certificate); ``timeout`` is the SMTP socket timeout in seconds.
    """
    if account.status == "disconnected":
        raise ConfigError(
            f"The account {account.name!r} is disconnected, so it sends no mail; add it again."
        )
    config = smtp_settings(account)
    if config is not None:
        password = smtp_password(account, settings) if config.login else None
        if config.login and not password:
            raise ConfigError(
                f"The account {account.name!r} has an SMTP login but no password; give one with "
                f"`mailroom account update {account.name} --smtp-password-file FILE`."
            )
        return SmtpTransport(
            config,
            password,
            allowed_hosts=settings.allowed_private_host_list,
            ssl_context=ssl_context,
            timeout=timeout,
        )
    registry.find(account.provider)  # loads the built-in providers, which register theirs
    factory = _FACTORIES.get(account.provider)
    if factory is not None:
        return factory(session, account, settings)
    raise ConfigError(
        f"The account {account.name!r} has no outgoing mail server; set one with "
        f"`mailroom account update {account.name} --smtp-host HOST`."
    )
