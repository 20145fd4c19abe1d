"""Microsoft 365 and outlook.com mailboxes over Microsoft Graph (not registered as a provider yet).

* :mod:`.api` — :class:`GraphClient`, the typed REST client (folders, per-folder
  delta, MIME, move, PATCH, ``$batch``, ``sendMail``, folder changes);
* :mod:`.models` — the values it returns; :mod:`.errors` — Graph errors as
  provider errors; :mod:`.limiter` — four requests in flight per mailbox;
  :mod:`.transport` — httpx through the SSRF guard.
"""

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
