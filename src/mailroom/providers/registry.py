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
* :func:`syncer_for` asks each registered syncer ``supports(account)`` in
  registration order and uses the first that claims the account: that is the
  whole dispatch; nothing outside a provider branches on its name.

The built-in providers are registered on first use (importing them lazily keeps
``mailroom.providers`` free of import cycles).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.providers.base import Importer, Propagator, Syncer, Watcher
from mailroom.store.engine import Store
from mailroom.store.models import Account

__all__ = [
    "ProviderEntry",
    "get",
    "importer_for",
    "names",
    "propagator_for",
    "register",
    "syncer_for",
    "unregister",
]


@dataclass(frozen=True)
class ProviderEntry:
    """What one provider offers, as factories."""

    name: str
    syncer: Callable[[Store, Settings | None], Syncer] | None = None
    importer: Callable[[Store, Settings | None], Importer] | None = None
    propagator: Callable[[Store, Settings | None], Propagator] | None = None
    watcher: Callable[[Store, int, Settings | None], Watcher] | None = None


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
    import mailroom.providers.imap  # noqa: F401  (registers itself)
    import mailroom.providers.local  # noqa: F401  (registers its propagator)


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


def syncer_for(store: Store, account: Account, settings: Settings | None = None) -> Syncer | None:
    """The first registered syncer that claims the account, or None."""
    _load_builtins()
    for entry in _PROVIDERS.values():
        if entry.syncer is None:
            continue
        syncer = entry.syncer(store, settings)
        if syncer.supports(account):
            return syncer
    return None


def importer_for(
    store: Store, account: Account, settings: Settings | None = None
) -> Importer | None:
    """The first registered importer that claims the account, or None."""
    _load_builtins()
    for entry in _PROVIDERS.values():
        if entry.importer is None:
            continue
        importer = entry.importer(store, settings)
        if importer.supports(account):
            return importer
    return None


def propagator_for(
    store: Store, account: Account, settings: Settings | None = None
) -> Propagator | None:
    """The first registered propagator that claims the account, or None."""
    _load_builtins()
    for entry in _PROVIDERS.values():
        if entry.propagator is None:
            continue
        propagator = entry.propagator(store, settings)
        if propagator.supports(account):
            return propagator
    return None
