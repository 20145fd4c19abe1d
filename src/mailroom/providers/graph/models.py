"""The typed values the Graph client returns and takes.

Graph answers JSON; these dataclasses keep what mailroom reads of it (and the
original mapping in ``raw`` for anything else). A delta item may be partial (an
update carries ``id`` and at least what changed), so every message field but
``id`` is optional.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BatchRequest",
    "BatchResult",
    "DeltaPage",
    "GraphFolder",
    "GraphMessage",
    "Removal",
]


@dataclass(frozen=True, slots=True)
class GraphFolder:
    """A mail folder; ``path`` is the display names from the top level down."""

    id: str
    name: str
    parent_id: str | None
    path: tuple[str, ...]
    child_count: int = 0
    unread_count: int = 0
    total_count: int = 0
    hidden: bool = False

    @classmethod
    def from_json(cls, data: Mapping[str, Any], above: tuple[str, ...] = ()) -> GraphFolder:
        """A folder from Graph's JSON, under the given parent path."""
        name = str(data.get("displayName", ""))
        return cls(
            id=str(data["id"]),
            name=name,
            parent_id=data.get("parentFolderId"),
            path=(*above, name),
            child_count=int(data.get("childFolderCount") or 0),
            unread_count=int(data.get("unreadItemCount") or 0),
            total_count=int(data.get("totalItemCount") or 0),
            hidden=bool(data.get("isHidden", False)),
        )


@dataclass(frozen=True, slots=True)
class GraphMessage:
    """A message (or the changed part of one) as a delta or GET shows it."""

    id: str
    folder_id: str | None = None
    conversation_id: str | None = None
    internet_message_id: str | None = None
    subject: str | None = None
    received: str | None = None
    is_read: bool | None = None
    flag_status: str | None = None
    categories: tuple[str, ...] | None = None
    change_key: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GraphMessage:
        """A message from Graph's JSON (missing properties stay None)."""
        flag = data.get("flag")
        categories = data.get("categories")
        return cls(
            id=str(data["id"]),
            folder_id=data.get("parentFolderId"),
            conversation_id=data.get("conversationId"),
            internet_message_id=data.get("internetMessageId"),
            subject=data.get("subject"),
            received=data.get("receivedDateTime"),
            is_read=data.get("isRead"),
            flag_status=flag.get("flagStatus") if isinstance(flag, dict) else None,
            categories=tuple(categories) if isinstance(categories, list) else None,
            change_key=data.get("changeKey"),
            raw=dict(data),
        )


@dataclass(frozen=True, slots=True)
class Removal:
    """An id a delta reports as no longer in the folder: ``reason`` changed or deleted."""

    id: str
    reason: str


@dataclass(frozen=True, slots=True)
class DeltaPage:
    """One page of a folder's delta round.

    Exactly one of ``next_link`` (more pages: follow it) and ``delta_link`` (the
    round is over: store it for the next sync) is set. A page may be empty and
    still have a ``next_link``; items may repeat across pages.
    """

    messages: tuple[GraphMessage, ...]
    removals: tuple[Removal, ...]
    next_link: str | None
    delta_link: str | None

    @property
    def last(self) -> bool:
        """Whether this page ends the round."""
        return self.delta_link is not None


@dataclass(frozen=True, slots=True)
class BatchRequest:
    """One part of a ``$batch``: ``url`` is relative to ``/v1.0`` (``/me/messages/...``)."""

    id: str
    method: str
    url: str
    body: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    depends_on: Sequence[str] = ()

    def to_json(self, prefer: str | None, sent: frozenset[str] | None = None) -> dict[str, Any]:
        """The part as Graph's batch JSON (with the client's ``Prefer``, if any).

        ``sent`` is the ids of the parts sent with it: a dependency outside them
        (one that already succeeded in an earlier try) is left out.
        """
        headers = dict(self.headers)
        if prefer and "Prefer" not in headers:
            headers["Prefer"] = prefer
        part: dict[str, Any] = {"id": self.id, "method": self.method.upper(), "url": self.url}
        if self.body is not None:
            part["body"] = dict(self.body)
            headers.setdefault("Content-Type", "application/json")
        if headers:
            part["headers"] = headers
        depends = [d for d in self.depends_on if sent is None or d in sent]
        if depends:
            part["dependsOn"] = depends
        return part


@dataclass(frozen=True, slots=True)
class BatchResult:
    """The answer to one part: ``error`` is the provider error for a failed part."""

    id: str
    status: int
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    error: Exception | None = None

    @property
    def ok(self) -> bool:
        """Whether the part succeeded (2xx)."""
        return 200 <= self.status < 300
