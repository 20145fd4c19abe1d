"""The Gmail API's resources as typed dicts (the JSON the API sends, field for field).

Only the fields mailroom reads are named; the API may send more. ``historyId``
and ``internalDate`` are strings (uint64 and epoch milliseconds), as sent.
"""

from __future__ import annotations

from typing import TypedDict

__all__ = [
    "Header",
    "HistoryLabelChange",
    "HistoryMessageChange",
    "HistoryRecord",
    "Label",
    "Message",
    "MessagePart",
    "MessagePartBody",
    "MessageRef",
    "Profile",
    "Thread",
]


class MessageRef(TypedDict):
    """A message as lists show it."""

    id: str
    threadId: str


class Header(TypedDict):
    """One header of a message part."""

    name: str
    value: str


class MessagePartBody(TypedDict, total=False):
    """A part's content: inline ``data`` (base64url) or an ``attachmentId``."""

    attachmentId: str
    size: int
    data: str


class MessagePart(TypedDict, total=False):
    """One MIME part (``payload`` is the root one)."""

    partId: str
    mimeType: str
    filename: str
    headers: list[Header]
    body: MessagePartBody
    parts: list[MessagePart]


class Message(TypedDict, total=False):
    """A message in any format (``raw`` only for ``format=raw``, ``payload`` for the others)."""

    id: str
    threadId: str
    labelIds: list[str]
    snippet: str
    historyId: str
    internalDate: str
    sizeEstimate: int
    payload: MessagePart
    raw: str


class Label(TypedDict, total=False):
    """A label (counts and color only from labels.get/create/patch)."""

    id: str
    name: str
    type: str
    messageListVisibility: str
    labelListVisibility: str
    messagesTotal: int
    messagesUnread: int
    threadsTotal: int
    threadsUnread: int
    color: dict[str, str]


class Profile(TypedDict):
    """users.getProfile."""

    emailAddress: str
    messagesTotal: int
    threadsTotal: int
    historyId: str


class HistoryMessageChange(TypedDict):
    """An entry of ``messagesAdded`` / ``messagesDeleted``."""

    message: Message


class HistoryLabelChange(TypedDict):
    """An entry of ``labelsAdded`` / ``labelsRemoved``: the message and the changed labels."""

    message: Message
    labelIds: list[str]


class HistoryRecord(TypedDict, total=False):
    """One history record (ascending ``id``)."""

    id: str
    messages: list[MessageRef]
    messagesAdded: list[HistoryMessageChange]
    messagesDeleted: list[HistoryMessageChange]
    labelsAdded: list[HistoryLabelChange]
    labelsRemoved: list[HistoryLabelChange]


class Thread(TypedDict, total=False):
    """threads.get: the thread's messages, oldest first."""

    id: str
    historyId: str
    messages: list[Message]
