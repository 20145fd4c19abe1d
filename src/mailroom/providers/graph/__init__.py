"""Microsoft 365 and outlook.com mailboxes over Microsoft Graph (the ``microsoft`` provider).

* :mod:`.api` — :class:`GraphClient`, the typed REST client (folders, per-folder
  delta, MIME, move, PATCH, ``$batch``, ``sendMail``, folder changes);
* :mod:`.models` — the values it returns; :mod:`.errors` — Graph errors as
  provider errors; :mod:`.limiter` — four requests in flight per mailbox;
  :mod:`.transport` — httpx through the SSRF guard;
* :mod:`.provider` — the registry entry; :mod:`.connection` — an account's
  client; :mod:`.folders` — the folder tree as labels; :mod:`.importer`,
  :mod:`.syncer`, :mod:`.rounds`, :mod:`.intake`, :mod:`.removals` — import and
  delta sync; :mod:`.propagator`, :mod:`.message_ops`, :mod:`.folder_ops` —
  changes carried to Graph; :mod:`.sending` — the outbound transport.

The names below are loaded on first use, so that registering the provider
(``mailroom accounts``, the CLI) imports no HTTP client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mailroom.providers.graph.api import GraphClient, TokenSource
    from mailroom.providers.graph.errors import FolderExistsError, NotFoundError
    from mailroom.providers.graph.limiter import SHARED_LIMITER, MailboxLimiter
    from mailroom.providers.graph.models import (
        BatchRequest,
        BatchResult,
        DeltaPage,
        GraphFolder,
        GraphMessage,
        Removal,
    )

__all__ = [
    "SHARED_LIMITER",
    "BatchRequest",
    "BatchResult",
    "DeltaPage",
    "FolderExistsError",
    "GraphClient",
    "GraphFolder",
    "GraphMessage",
    "MailboxLimiter",
    "NotFoundError",
    "Removal",
    "TokenSource",
]

_HOMES = {
    "GraphClient": "api",
    "TokenSource": "api",
    "FolderExistsError": "errors",
    "NotFoundError": "errors",
    "SHARED_LIMITER": "limiter",
    "MailboxLimiter": "limiter",
    "BatchRequest": "models",
    "BatchResult": "models",
    "DeltaPage": "models",
    "GraphFolder": "models",
    "GraphMessage": "models",
    "Removal": "models",
}


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
