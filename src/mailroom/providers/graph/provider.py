"""The ``microsoft`` provider entry: sync, import, propagation, connect and sending.

Registered when the registry loads its built-in providers. The factories import
their modules only when called, so loading the registry imports no HTTP client.
``add_command`` is the connect command of :mod:`mailroom.oauth.providers`;
``files_sent_mail`` is True because ``sendMail`` saves a copy in Sent Items
(``saveToSentItems``) itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mailroom.config import Settings
from mailroom.oauth.providers import microsoft_add_command
from mailroom.outbound.transports import register_transport
from mailroom.providers import registry
from mailroom.store.engine import Store

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from mailroom.outbound.base import Transport
    from mailroom.providers.base import Importer, Propagator, Syncer
    from mailroom.store.models import Account

__all__ = ["PROVIDER", "register"]

PROVIDER = "microsoft"  # Account.provider of Microsoft 365 / outlook.com accounts


def _syncer(store: Store, settings: Settings | None) -> Syncer:
    from mailroom.providers.graph.syncer import GraphSyncer

    return GraphSyncer(store, settings)


def _importer(store: Store, settings: Settings | None) -> Importer:
    from mailroom.providers.graph.importer import GraphImporter

    return GraphImporter(store, settings)


def _propagator(store: Store, settings: Settings | None) -> Propagator:
    from mailroom.providers.graph.propagator import GraphPropagator

    return GraphPropagator(store, settings)


def _transport(session: Session, account: Account, settings: Settings) -> Transport:
    from mailroom.providers.graph.sending import graph_transport

    return graph_transport(session, account, settings)


def register() -> None:
    """Register (or replace) the full Microsoft entry and its outbound transport."""
    registry.register(
        registry.ProviderEntry(
            name=PROVIDER,
            syncer=_syncer,
            importer=_importer,
            propagator=_propagator,
            add_command=microsoft_add_command,
            files_sent_mail=True,
        )
    )
    register_transport(PROVIDER, _transport)


register()
