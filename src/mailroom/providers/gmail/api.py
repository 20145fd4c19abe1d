"""mailroom's typed Gmail API v1 client (httpx, every connection through the SSRF guard).

:class:`GmailApi` speaks Google's documented REST contract; the base URL is
configurable (Google's by default, the emulator's in tests). What it promises:

* **Tokens** come from a :class:`TokenSource`. A 401 tells the source the
  token was rejected and the request is sent once more with the fresh one; a
  second 401, or a refused refresh (the source raises AuthError), is an
  AuthError for the account.
* **Quota**: before each request is sent, ``charge`` (when given) is called
  with the request's quota units from ``costs`` (Google's published table,
  :data:`QUOTA_COSTS`, by default); a batch is charged the sum of its calls.
  This is where the quota pacer plugs in: it may block, or raise to defer.
* **Errors** are mailroom's provider errors in one sentence
  (:mod:`mailroom.providers.gmail.errors`); a too-old ``startHistoryId``
  (404 on history.list) is :class:`InvalidCursorError`: reset and resync.
* **Batches**: :meth:`GmailApi.get_messages` fetches up to ``batch_size``
  messages per multipart request and reports each id found, missing (404)
  or failed — an inner 429/403 rate rejection is a :class:`QuotaExceededError`
  for that id only, the rest of the batch stands.
* **Transport**: https, except to a loopback address (the emulator); the SSRF
  guard vets every request (:mod:`mailroom.providers.guarded_http`).
* **Paging**: ``iter_*`` methods follow ``nextPageToken`` to the end;
  ``list_messages`` / ``history`` return one page.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Protocol, Self, cast
from urllib.parse import quote, urlencode

import httpx

from mailroom.errors import ProviderError
from mailroom.providers.base import InvalidCursorError, RateLimitError, TransientError
from mailroom.providers.gmail.batch import BatchCall, build_batch, read_batch
from mailroom.providers.gmail.errors import GmailNotFoundError, error_for
from mailroom.providers.gmail.resources import (
    HistoryRecord,
    Label,
    Message,
    MessageRef,
    Profile,
    Thread,
)
from mailroom.providers.guarded_http import GuardedTransport, require_https

__all__ = [
    "DEFAULT_BASE_URL",
    "QUOTA_COSTS",
    "BatchGetResult",
    "GmailApi",
    "GmailRequestShapeError",
    "HistoryPage",
    "MessageFormat",
    "MessagePage",
    "TokenSource",
    "decode_raw",
]

DEFAULT_BASE_URL = "https://gmail.googleapis.com"
BATCH_PATH = "/batch/gmail/v1"
MAX_PAGE_SIZE = 500
MAX_BATCH_CALLS = 100
DEFAULT_BATCH_SIZE = 50  # Google advises against batches of more than 50
MAX_BATCH_MODIFY_IDS = 1000
DEFAULT_TIMEOUT = 30.0

MessageFormat = Literal["minimal", "metadata", "full", "raw"]

# Quota units per method, from Google's published table (developers.google.com/workspace/
# gmail/api/reference/quota). A pacer that knows better (60 per full/raw message) passes
# its own ``costs`` or accounts in ``charge``.
QUOTA_COSTS: Mapping[str, int] = {
    "getProfile": 1,
    "labels.list": 1,
    "labels.get": 1,
    "labels.create": 5,
    "labels.patch": 5,
    "labels.delete": 5,
    "history.list": 2,
    "messages.list": 5,
    "messages.get": 5,
    "messages.attachments.get": 5,
    "messages.modify": 5,
    "messages.trash": 5,
    "messages.untrash": 5,
    "messages.delete": 10,
    "messages.batchModify": 50,
    "messages.send": 100,
    "threads.get": 10,
}


class TokenSource(Protocol):
    """Hands out access tokens (:class:`mailroom.oauth.source.TokenSource` is one)."""

    def access_token(self) -> str:
        """A token that is not known to be expired (AuthError if none can be had)."""
        ...

    def rejected(self, token: str) -> str:
        """The API refused ``token`` (401): a fresh one, or AuthError if refresh is refused."""
        ...


@dataclass(frozen=True, slots=True)
class MessagePage:
    """One page of messages.list."""

    messages: list[MessageRef]
    next_page_token: str | None
    result_size_estimate: int


@dataclass(frozen=True, slots=True)
class HistoryPage:
    """One page of history.list; ``history_id`` is the mailbox's current one."""

    records: list[HistoryRecord]
    history_id: str
    next_page_token: str | None


@dataclass(slots=True)
class BatchGetResult:
    """What a batch fetch found: messages by id, ids Gmail does not have, ids that failed."""

    messages: dict[str, Message] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    failed: dict[str, ProviderError] = field(default_factory=dict)

    @property
    def rate_limited(self) -> list[str]:
        """The ids refused over the quota (fetch them again later)."""
        return [i for i, error in self.failed.items() if isinstance(error, RateLimitError)]

    @property
    def retry_after(self) -> float | None:
        """The longest wait any rate rejection asked for (None: none said)."""
        waits = [
            error.retry_after
            for error in self.failed.values()
            if isinstance(error, RateLimitError) and error.retry_after is not None
        ]
        return max(waits) if waits else None


class GmailRequestShapeError(TransientError):
    """Gmail's answer did not have the documented shape (retry; report if it persists)."""


def decode_raw(message: Message) -> bytes:
    """The RFC 5322 bytes of a ``format=raw`` message (base64url, padded or not)."""
    raw = message.get("raw")
    if not raw:
        raise GmailRequestShapeError("Gmail sent a message without its raw content.")
    return base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))


def _chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class GmailApi:
    """The Gmail API of one user (see the module docstring)."""

    def __init__(
        self,
        tokens: TokenSource,
        *,
        base_url: str = DEFAULT_BASE_URL,
        allowed_hosts: Iterable[str] = (),
        charge: Callable[[int], None] | None = None,
        costs: Mapping[str, int] = QUOTA_COSTS,
        timeout: float = DEFAULT_TIMEOUT,
        user_id: str = "me",
    ) -> None:
        require_https(base_url, "The Gmail API URL")
        self._tokens = tokens
        self._charge = charge
        self._costs = costs
        self._api = f"/gmail/v1/users/{quote(user_id, safe='@')}"
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"),
            transport=GuardedTransport(allowed_hosts),
            timeout=timeout,
            follow_redirects=False,
        )

    def close(self) -> None:
        """Close the pooled connections."""
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- plumbing ---------------------------------------------------------

    def cost(self, method: str) -> int:
        """The quota units one call of ``method`` is charged."""
        return self._costs.get(method, 5)

    def _send(
        self,
        verb: str,
        path: str,
        what: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        content: bytes | None = None,
        content_type: str | None = None,
        units: int,
    ) -> httpx.Response:
        token = self._tokens.access_token()
        for attempt in (1, 2):
            if self._charge is not None:
                self._charge(units)
            headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
            if content_type is not None:
                headers["Content-Type"] = content_type
            try:
                response = self._client.request(
                    verb,
                    path,
                    params=_query(params),
                    json=body,
                    content=content,
                    headers=headers,
                )
            except httpx.TransportError as exc:
                raise TransientError(
                    f"Gmail could not be reached while trying to {what}; it will try again.",
                    reason=f"Gmail unreachable: {type(exc).__name__}",
                ) from None
            if response.status_code == 401 and attempt == 1:
                token = self._tokens.rejected(token)
                continue
            if response.status_code >= 400:
                raise error_for(response.status_code, _json(response), response.headers, what)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _call(
        self,
        method: str,
        verb: str,
        path: str,
        what: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
    ) -> Any:
        response = self._send(
            verb, self._api + path, what, params=params, body=body, units=self.cost(method)
        )
        return _json(response) if response.content else None

    # -- profile and labels -----------------------------------------------

    def profile(self) -> Profile:
        """The mailbox's address, totals and current historyId."""
        return cast(Profile, self._call("getProfile", "GET", "/profile", "read the profile"))

    def labels(self) -> list[Label]:
        """Every label (system and user; counts are not included)."""
        answer = self._call("labels.list", "GET", "/labels", "list the labels")
        return cast(list[Label], answer.get("labels", []))

    def label(self, label_id: str) -> Label:
        """One label with its counts."""
        path = f"/labels/{quote(label_id, safe='')}"
        return cast(Label, self._call("labels.get", "GET", path, "read a label"))

    def create_label(
        self,
        name: str,
        *,
        message_list_visibility: str = "show",
        label_list_visibility: str = "labelShow",
    ) -> Label:
        """A new user label (GmailRequestError if the name is taken)."""
        body = {
            "name": name,
            "messageListVisibility": message_list_visibility,
            "labelListVisibility": label_list_visibility,
        }
        return cast(
            Label, self._call("labels.create", "POST", "/labels", "create a label", body=body)
        )

    def patch_label(self, label_id: str, **fields: Any) -> Label:
        """Change a user label's fields (``name=...``, ``labelListVisibility=...``)."""
        path = f"/labels/{quote(label_id, safe='')}"
        return cast(Label, self._call("labels.patch", "PATCH", path, "change a label", body=fields))

    def delete_label(self, label_id: str) -> None:
        """Delete a user label (it leaves its messages)."""
        path = f"/labels/{quote(label_id, safe='')}"
        self._call("labels.delete", "DELETE", path, "delete a label")

    # -- listing ----------------------------------------------------------

    def list_messages(
        self,
        *,
        query: str | None = None,
        label_ids: Sequence[str] = (),
        include_spam_trash: bool = False,
        page_size: int = MAX_PAGE_SIZE,
        page_token: str | None = None,
    ) -> MessagePage:
        """One page of message ids, newest first."""
        params: dict[str, Any] = {"maxResults": min(page_size, MAX_PAGE_SIZE)}
        if query:
            params["q"] = query
        if label_ids:
            params["labelIds"] = list(label_ids)
        if include_spam_trash:
            params["includeSpamTrash"] = "true"
        if page_token:
            params["pageToken"] = page_token
        answer = self._call("messages.list", "GET", "/messages", "list messages", params=params)
        return MessagePage(
            cast(list[MessageRef], answer.get("messages", [])),
            answer.get("nextPageToken"),
            int(answer.get("resultSizeEstimate", 0)),
        )

    def iter_messages(
        self,
        *,
        query: str | None = None,
        label_ids: Sequence[str] = (),
        include_spam_trash: bool = False,
        page_size: int = MAX_PAGE_SIZE,
    ) -> Iterator[MessageRef]:
        """Every matching message id, newest first, page after page."""
        token: str | None = None
        while True:
            page = self.list_messages(
                query=query,
                label_ids=label_ids,
                include_spam_trash=include_spam_trash,
                page_size=page_size,
                page_token=token,
            )
            yield from page.messages
            token = page.next_page_token
            if not token:
                return

    # -- one message ------------------------------------------------------

    def get_message(
        self, message_id: str, format: MessageFormat = "full", metadata_headers: Sequence[str] = ()
    ) -> Message:
        """One message (GmailNotFoundError if Gmail does not have it)."""
        path = f"/messages/{quote(message_id, safe='')}"
        answer = self._fetch("messages.get", path, "a message", format, metadata_headers)
        return cast(Message, answer)

    def get_raw(self, message_id: str) -> bytes:
        """The message's RFC 5322 bytes."""
        return decode_raw(self.get_message(message_id, "raw"))

    def get_attachment(self, message_id: str, attachment_id: str) -> bytes:
        """The decoded content of one attachment."""
        path = f"/messages/{quote(message_id, safe='')}/attachments/{quote(attachment_id, safe='')}"
        answer = self._call("messages.attachments.get", "GET", path, "fetch an attachment")
        data = str(answer.get("data", ""))
        return base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))

    def get_thread(
        self, thread_id: str, format: MessageFormat = "full", metadata_headers: Sequence[str] = ()
    ) -> Thread:
        """A thread and its messages, oldest first."""
        path = f"/threads/{quote(thread_id, safe='')}"
        return cast(Thread, self._fetch("threads.get", path, "a thread", format, metadata_headers))

    def _fetch(
        self, method: str, path: str, what: str, format: str, metadata_headers: Sequence[str]
    ) -> Any:
        params = _get_params(format, metadata_headers)
        return self._call(method, "GET", path, f"fetch {what}", params=params)

    def modify(
        self, message_id: str, add: Sequence[str] = (), remove: Sequence[str] = ()
    ) -> Message:
        """Add and remove labels of one message; the message's id, thread and labels."""
        body = {"addLabelIds": list(add), "removeLabelIds": list(remove)}
        path = f"/messages/{quote(message_id, safe='')}/modify"
        return cast(
            Message, self._call("messages.modify", "POST", path, "change labels", body=body)
        )

    def batch_modify(
        self, message_ids: Sequence[str], add: Sequence[str] = (), remove: Sequence[str] = ()
    ) -> None:
        """Add and remove labels of many messages (1,000 ids per request)."""
        for chunk in _chunks(list(message_ids), MAX_BATCH_MODIFY_IDS):
            body = {"ids": list(chunk), "addLabelIds": list(add), "removeLabelIds": list(remove)}
            self._call(
                "messages.batchModify", "POST", "/messages/batchModify", "change labels", body=body
            )

    def trash(self, message_id: str) -> Message:
        """Move a message to the trash."""
        path = f"/messages/{quote(message_id, safe='')}/trash"
        return cast(Message, self._call("messages.trash", "POST", path, "trash a message"))

    def untrash(self, message_id: str) -> Message:
        """Take a message out of the trash."""
        path = f"/messages/{quote(message_id, safe='')}/untrash"
        return cast(Message, self._call("messages.untrash", "POST", path, "restore a message"))

    def delete(self, message_id: str) -> None:
        """Delete a message forever (needs the full mail scope)."""
        path = f"/messages/{quote(message_id, safe='')}"
        self._call("messages.delete", "DELETE", path, "delete a message")

    def send(self, raw: bytes, thread_id: str | None = None) -> Message:
        """Send RFC 5322 bytes; ``thread_id`` puts a reply into its thread."""
        body: dict[str, Any] = {"raw": base64.urlsafe_b64encode(raw).decode("ascii")}
        if thread_id:
            body["threadId"] = thread_id
        return cast(
            Message, self._call("messages.send", "POST", "/messages/send", "send mail", body=body)
        )

    # -- history ----------------------------------------------------------

    def history(
        self,
        start_history_id: str | int,
        *,
        history_types: Sequence[str] = (),
        label_id: str | None = None,
        page_size: int = MAX_PAGE_SIZE,
        page_token: str | None = None,
    ) -> HistoryPage:
        """One page of changes after ``start_history_id`` (InvalidCursorError if too old)."""
        params: dict[str, Any] = {
            "startHistoryId": str(start_history_id),
            "maxResults": min(page_size, MAX_PAGE_SIZE),
        }
        if history_types:
            params["historyTypes"] = list(history_types)
        if label_id:
            params["labelId"] = label_id
        if page_token:
            params["pageToken"] = page_token
        try:
            answer = self._call(
                "history.list", "GET", "/history", "read the changes", params=params
            )
        except GmailNotFoundError:
            raise InvalidCursorError(
                "Gmail no longer keeps the changes since the last sync; the mailbox will be "
                "read again."
            ) from None
        return HistoryPage(
            cast(list[HistoryRecord], answer.get("history", [])),
            str(answer.get("historyId", "")),
            answer.get("nextPageToken"),
        )

    def iter_history(
        self,
        start_history_id: str | int,
        *,
        history_types: Sequence[str] = (),
        label_id: str | None = None,
        page_size: int = MAX_PAGE_SIZE,
    ) -> Iterator[HistoryPage]:
        """Every page of changes after ``start_history_id``; the last one's ``history_id``
        is where the next sync starts."""
        token: str | None = None
        while True:
            page = self.history(
                start_history_id,
                history_types=history_types,
                label_id=label_id,
                page_size=page_size,
                page_token=token,
            )
            yield page
            token = page.next_page_token
            if not token:
                return

    # -- batches ----------------------------------------------------------

    def get_messages(
        self,
        message_ids: Sequence[str],
        format: MessageFormat = "raw",
        metadata_headers: Sequence[str] = (),
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> BatchGetResult:
        """Fetch many messages with multipart batches of ``batch_size`` (at most 100) calls."""
        size = max(1, min(batch_size, MAX_BATCH_CALLS))
        params = _query(_get_params(format, metadata_headers))
        suffix = "?" + urlencode(params, doseq=True) if params else ""
        result = BatchGetResult()
        for chunk in _chunks(list(dict.fromkeys(message_ids)), size):
            calls = [
                BatchCall("GET", f"{self._api}/messages/{quote(i, safe='')}{suffix}") for i in chunk
            ]
            self._batch(chunk, calls, result)
        return result

    def _batch(self, ids: Sequence[str], calls: list[BatchCall], result: BatchGetResult) -> None:
        content_type, body = build_batch(calls)
        response = self._send(
            "POST",
            BATCH_PATH,
            "fetch messages",
            content=body,
            content_type=content_type,
            units=self.cost("messages.get") * len(calls),
        )
        answered: set[int] = set()
        for reply in read_batch(response.headers.get("content-type", ""), response.content):
            if not 0 <= reply.index < len(ids) or reply.index in answered:
                continue
            answered.add(reply.index)
            message_id = ids[reply.index]
            if reply.status == 200:
                result.messages[message_id] = cast(Message, _loads(reply.body))
            elif reply.status == 404:
                result.missing.append(message_id)
            else:
                result.failed[message_id] = error_for(
                    reply.status, _loads(reply.body), reply.headers, "fetch a message"
                )
        for index, message_id in enumerate(ids):
            if index not in answered:
                result.failed[message_id] = TransientError(
                    "Gmail's batch answer left out a message; it will be fetched again.",
                    reason="batch answer incomplete",
                )


def _get_params(format: str, metadata_headers: Sequence[str]) -> dict[str, Any]:
    params: dict[str, Any] = {"format": format}
    if format == "metadata" and metadata_headers:
        params["metadataHeaders"] = list(metadata_headers)
    return params


def _query(params: Mapping[str, Any] | None) -> list[tuple[str, str | int | float | bool | None]]:
    """Parameters as pairs (a list value repeats the name, as Google expects)."""
    pairs: list[tuple[str, str | int | float | bool | None]] = []
    for name, value in (params or {}).items():
        values = value if isinstance(value, list) else [value]
        pairs += [(name, str(v)) for v in values]
    return pairs


def _loads(body: bytes) -> Any:
    try:
        return json.loads(body) if body.strip() else None
    except ValueError:
        return None


def _json(response: httpx.Response) -> Any:
    return _loads(response.content)
