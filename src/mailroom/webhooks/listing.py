"""What the operator lists of webhooks: the endpoints and the dead-lettered deliveries.

Plain SQL through a :class:`~mailroom.store.reader.Reader` (or the same SQL in a
session), so ``mailroom webhooks list`` and ``webhooks dead`` start without
SQLAlchemy or the ORM, as the other read commands do.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from mailroom.store.reader import Reader, as_reader, json_value, required_stamp

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

__all__ = ["DeadEntry", "EndpointInfo", "dead_list", "list_endpoints"]


@dataclass(frozen=True)
class EndpointInfo:
    """One endpoint as the operator sees it (never its secret)."""

    id: int
    owner: str
    url: str
    events: list[str]
    active: bool
    disabled_reason: str | None
    created_at: datetime

    def as_json(self) -> dict[str, Any]:
        """The endpoint as a JSON object."""
        return {
            "id": self.id,
            "owner": self.owner,
            "url": self.url,
            "events": self.events,
            "active": self.active,
            "disabledReason": self.disabled_reason,
            "createdAt": self.created_at.isoformat(),
        }


@dataclass(frozen=True)
class DeadEntry:
    """One dead-lettered delivery, for the operator."""

    id: int
    endpoint_id: int
    owner: str
    url: str
    event_id: str
    event_type: str
    attempts: int
    last_code: int | None
    last_error: str | None
    created_at: datetime

    def as_json(self) -> dict[str, Any]:
        """The entry as a JSON object."""
        return {
            "id": self.id,
            "endpointId": self.endpoint_id,
            "owner": self.owner,
            "url": self.url,
            "eventId": self.event_id,
            "type": self.event_type,
            "attempts": self.attempts,
            "lastCode": self.last_code,
            "lastError": self.last_error,
            "createdAt": self.created_at.isoformat(),
        }


def _of_user(user_id: int | None) -> tuple[str, dict[str, Any]]:
    """The condition on the endpoint's owner (none when every user's are wanted)."""
    if user_id is None:
        return "", {}
    return " AND webhook_endpoints.user_id = :user", {"user": user_id}


def list_endpoints(source: Reader | Session, user_id: int | None = None) -> list[EndpointInfo]:
    """Every endpoint (of one user when given), oldest first."""
    condition, params = _of_user(user_id)
    rows = as_reader(source).rows(
        "SELECT webhook_endpoints.id, users.name, webhook_endpoints.url, webhook_endpoints.events, "
        "webhook_endpoints.active, webhook_endpoints.disabled_reason, "
        "webhook_endpoints.created_at FROM webhook_endpoints "
        f"JOIN users ON users.id = webhook_endpoints.user_id WHERE 1 = 1{condition} "
        "ORDER BY webhook_endpoints.id",
        params,
    )
    return [
        EndpointInfo(
            id=endpoint_id,
            owner=owner,
            url=url,
            events=list(json_value(events) or []),
            active=bool(active),
            disabled_reason=disabled_reason,
            created_at=required_stamp(created_at),
        )
        for endpoint_id, owner, url, events, active, disabled_reason, created_at in rows
    ]


def dead_list(source: Reader | Session, user_id: int | None = None) -> list[DeadEntry]:
    """The dead-lettered deliveries (of one user when given), oldest first."""
    condition, params = _of_user(user_id)
    rows = as_reader(source).rows(
        "SELECT webhook_deliveries.id, webhook_deliveries.endpoint_id, users.name, "
        "webhook_endpoints.url, webhook_deliveries.event_id, webhook_deliveries.event_type, "
        "webhook_deliveries.attempts, webhook_deliveries.last_code, "
        "webhook_deliveries.last_error, webhook_deliveries.created_at FROM webhook_deliveries "
        "JOIN webhook_endpoints ON webhook_endpoints.id = webhook_deliveries.endpoint_id "
        "JOIN users ON users.id = webhook_endpoints.user_id "
        f"WHERE webhook_deliveries.state = 'dead'{condition} ORDER BY webhook_deliveries.id",
        params,
    )
    return [
        DeadEntry(
            id=row[0],
            endpoint_id=row[1],
            owner=row[2],
            url=row[3],
            event_id=row[4],
            event_type=row[5],
            attempts=row[6],
            last_code=row[7],
            last_error=row[8],
            created_at=required_stamp(row[9]),
        )
        for row in rows
    ]
