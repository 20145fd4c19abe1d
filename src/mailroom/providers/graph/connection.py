"""One Microsoft account's Graph client, built from its row.

:func:`open_client` gives a :class:`~mailroom.providers.graph.api.GraphClient`
whose tokens come from :class:`mailroom.oauth.source.TokenSource` (refreshed on
401, ``auth_error`` when Microsoft refuses the refresh), whose connections go
through the SSRF guard with the operator's allow-list, and whose requests share
the process-wide limit of four in flight per mailbox (keyed by account id).

Graph's base URL is Microsoft's; ``Account.settings["graph"]["api_url"]``
replaces it (the emulator in tests and demos). Immutable ids are asked for
unless ``Account.settings["graph"]["immutable_ids"]`` is False: then a move
gives the message a new id, which the propagator learns from the answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from mailroom.config import Settings, load_settings
from mailroom.errors import ConfigError
from mailroom.oauth.source import TokenSource
from mailroom.providers.graph.api import DEFAULT_BASE_URL, GraphClient
from mailroom.store.engine import Store
from mailroom.store.models import Account

__all__ = ["PROVIDER", "GraphAccount", "graph_settings", "open_client"]

PROVIDER = "microsoft"


def graph_settings(settings: object) -> dict[str, Any]:
    """The ``graph`` part of an account's settings (empty when there is none)."""
    graph = settings.get("graph") if isinstance(settings, dict) else None
    return dict(graph) if isinstance(graph, dict) else {}


@dataclass(frozen=True, slots=True)
class GraphAccount:
    """The ids of a Microsoft account and its open client (close the client when done)."""

    account_id: int
    user_id: int
    client: GraphClient


def open_client(store: Store, settings: Settings | None, account_id: int) -> GraphAccount:
    """Open the Microsoft account ``account_id`` (ConfigError when it is not one)."""
    settings = settings or load_settings()
    with store.session() as session:
        row = session.execute(
            select(Account.user_id, Account.provider, Account.settings).where(
                Account.id == account_id
            )
        ).one_or_none()
    if row is None or row.provider != PROVIDER:
        raise ConfigError(f"There is no Microsoft account with id {account_id}.")
    graph = graph_settings(row.settings or {})
    client = GraphClient(
        TokenSource(store, account_id, settings),
        account=account_id,
        base_url=str(graph.get("api_url") or DEFAULT_BASE_URL),
        allowed_private_hosts=settings.allowed_private_host_list,
        immutable_ids=bool(graph.get("immutable_ids", True)),
    )
    return GraphAccount(account_id, int(row.user_id), client)
