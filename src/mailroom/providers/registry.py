"""Providers register here by name; the dispatcher knows no provider.

Contract:

* A provider registers one :class:`ProviderEntry` under a unique name (the value of
  ``Account.provider`` of the accounts it owns, e.g. ``"imap"``). Registering the
  same name twice replaces the entry (tests and plugins may override).
* Every factory takes the :class:`~mailroom.store.engine.Store` and the
  :class:`~mailroom.config.Settings` in force (None: read them from the
  environment) and returns a service from :mod:`mailroom.providers.base`; services
  hold ids, never ORM objects across commits, and are safe to create per job.
* ``syncer``/``importer``/``propagator`` may be None when the provider has no such
  part (local files are imported once and have nothing to sync); ``watcher`` is
  None when the provider has no live push. ``watcher`` takes (store, account id,
  settings).
* ``files_sent_mail`` declares that the provider files a copy of every message
  sent through it in its own Sent folder (Gmail API send, Graph sendMail with
  ``saveToSentItems``): mailroom then stores and appends no Sent copy of its
  own, and the next sync brings the provider's (``outbound.filing``). False for
  IMAP, whose SMTP server files nothing.
* ``add_command`` (optional) returns the provider's ``mailroom account add NAME``
  click command, built lazily so that the CLI starts without importing providers;
  ``cli/accounts.py`` lists these and names no provider.
* Dispatch is by name only: :func:`syncer_for` (and the others) take the
  account's ``provider`` value and build that entry's service, or return None
  when the provider is unknown or has no such part. Whether the account is
  active is the caller's business; nothing outside a provider branches on its name.

The built-in providers are registered on first use (importing them lazily keeps
``mailroom.providers`` free of import cycles).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.providers.base import Importer, Propagator, Syncer, Watcher
from mailroom.store.engine import Store

if TYPE_CHECKING:
    import click

__all__ = [
    "ProviderEntry",
    "files_sent_mail",
    "find",
    "get",
    "importer_for",
    "names",
    "propagator_for",
    "register",
    "syncer_for",
    "unregister",
    "watcher_for",
]


@dataclass(frozen=True)
class ProviderEntry:
    """What one provider offers, as factories."""

    name: str
    syncer: Callable[[Store, Settings | None], Syncer] | None = None
    importer: Callable[[Store, Settings | None], Importer] | None = None
    propagator: Callable[[Store, Settings | None], Propagator] | None = None
    watcher: Callable[[Store, int, Settings | None], Watcher] | None = None
    add_command: Callable[[], click.Command] | None = None
    files_sent_mail: bool = False


_PROVIDERS: dict[str, ProviderEntry] = {}
_BUILTINS_LOADED = False


def register(entry: ProviderEntry) -> None:
    """Register (or replace) a provider under ``entry.name``."""
    _PROVIDERS[entry.name] = entry


def unregister(name: str) -> None:
    """Remove a provider (tests and plugins); unknown names are ignored."""
    _PROVIDERS.pop(name, None)


def _load_builtins() -> None:
    global _BUILTINS_LOADED
    if _BUILTINS_LOADED:
        return
    _BUILTINS_LOADED = True
    import mailroom.providers.gmail.provider  # noqa: F401  (registers itself)
    import mailroom.providers.graph.provider  # noqa: F401  (registers itself)
    import mailroom.providers.imap  # noqa: F401  (registers itself)
    import mailroom.providers.local  # noqa: F401  (registers itself)


def names() -> list[str]:
    """The names of all registered providers."""
    _load_builtins()
    return sorted(_PROVIDERS)


def get(name: str) -> ProviderEntry:
    """The provider registered under ``name``, or a ConfigError in plain words."""
    _load_builtins()
    try:
        return _PROVIDERS[name]
    except KeyError:
        known = ", ".join(sorted(_PROVIDERS)) or "none"
        raise ConfigError(f"There is no mail provider called {name!r} (known: {known}).") from None


def find(name: str) -> ProviderEntry | None:
    """The provider registered under ``name``, or None."""
    _load_builtins()
    return _PROVIDERS.get(name)


def files_sent_mail(provider: str) -> bool:
    """Whether the provider called ``provider`` files sent mail in its Sent folder itself."""
    entry = find(provider)
    return entry is not None and entry.files_sent_mail


def syncer_for(store: Store, provider: str, settings: Settings | None = None) -> Syncer | None:
    """The syncer of the provider called ``provider``, or None."""
    entry = find(provider)
    return entry.syncer(store, settings) if entry and entry.syncer else None


def importer_for(store: Store, provider: str, settings: Settings | None = None) -> Importer | None:
    """The importer of the provider called ``provider``, or None."""
    entry = find(provider)
    return entry.importer(store, settings) if entry and entry.importer else None


def propagator_for(
    store: Store, provider: str, settings: Settings | None = None
) -> Propagator | None:
    """The propagator of the provider called ``provider``, or None."""
    entry = find(provider)
    return entry.propagator(store, settings) if entry and entry.propagator else None


def watcher_for(
    store: Store, provider: str, account_id: int, settings: Settings | None = None
) -> Watcher | None:
    """A watcher of the account, when its provider has live push; else None."""
    entry = find(provider)
    return entry.watcher(store, account_id, settings) if entry and entry.watcher else None
