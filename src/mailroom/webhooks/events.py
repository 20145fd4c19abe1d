"""The events a webhook endpoint can ask for, their ids and the JSON body of each.

Every event is ``{"id", "type", "created", "data"}``. Its id is made from the
durable record it reports, so deriving it twice yields the same id and the
delivery's unique ``(endpoint_id, event_id)`` keeps it to one delivery::

    messageNew            messageNew-<email id>             Email "created" (change log)
    messageUpdated        messageUpdated-<email id>-<state> Email "updated" up to that state
    messageDeleted        messageDeleted-<email id>         Email "destroyed"
    messageSent           messageSent-<submission id>       the submission is ``sent``
    messageFailed         messageFailed-<submission>-<ms>   the submission gave up (at ms)
    messageBounced        messageBounced-<bounce id>        a bounce names the submission
    accountInitialized    accountInitialized-<event id>     account_events (triggers)
    authenticationError   authenticationError-<event id>
    accountStatusChanged  accountStatusChanged-<event id>
    ping                  ping-<random>                     ``mailroom webhooks test``

A receiver must be idempotent per event id: a worker that dies after the
receiver answered but before the outcome was stored sends the event again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["EVENT_TYPES", "PING", "Event", "parse_event_types"]

EVENT_TYPES = (
    "messageNew",
    "messageUpdated",
    "messageDeleted",
    "messageSent",
    "messageFailed",
    "messageBounced",
    "accountInitialized",
    "authenticationError",
    "accountStatusChanged",
)
PING = "ping"  # sent only by `mailroom webhooks test`, whatever the endpoint asked for


@dataclass(frozen=True)
class Event:
    """One event, ready to be stored as a delivery."""

    id: str
    type: str
    created: datetime
    data: dict[str, Any]

    def body(self) -> str:
        """The JSON body every attempt of every delivery of this event sends."""
        document = {
            "id": self.id,
            "type": self.type,
            "created": self.created.isoformat(),
            "data": self.data,
        }
        return json.dumps(document, ensure_ascii=False, separators=(",", ":"), default=str)


def parse_event_types(text: str | None) -> list[str]:
    """``"messageNew, messageSent"`` → the list; empty or ``all`` is every type."""
    from mailroom.errors import ConfigError

    names = [part.strip() for part in (text or "").replace(" ", ",").split(",") if part.strip()]
    if not names or names == ["all"]:
        return list(EVENT_TYPES)
    unknown = [name for name in names if name not in EVENT_TYPES]
    if unknown:
        raise ConfigError(
            f"There is no webhook event called {unknown[0]!r}; the events are "
            f"{', '.join(EVENT_TYPES)}."
        )
    return list(dict.fromkeys(names))
