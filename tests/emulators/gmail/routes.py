"""The Gmail API v1 methods: one handler per method, on a :class:`Mailbox`.

A route is (HTTP method, path pattern under ``/gmail/v1/users/{userId}``,
the quota method name). Handlers take the path groups, the query (a dict of
lists, repeated parameters kept) and the JSON body, and return (status, JSON
or None). Errors are raised as :class:`ApiError` with Google's envelope.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tests.emulators.gmail.errors import ApiError, failed_precondition, invalid_argument, not_found
from tests.emulators.gmail.mailbox import MAX_MODIFY_LABELS, Mailbox, StoredMessage
from tests.emulators.gmail.payload import (
    b64url,
    find_part,
    from_b64url,
    headers_of,
    parse,
    part_of_attachment,
    render_part,
    snippet,
)
from tests.emulators.gmail.search import Candidate, parse_query

Query = dict[str, list[str]]
Result = tuple[int, Any]
FORMATS = ("minimal", "metadata", "full", "raw")
HISTORY_TYPES = {"messageAdded", "messageDeleted", "labelAdded", "labelRemoved"}
HISTORY_KEYS = {
    "messageAdded": "messagesAdded",
    "messageDeleted": "messagesDeleted",
    "labelAdded": "labelsAdded",
    "labelRemoved": "labelsRemoved",
}
MAX_BATCH_IDS = 1000


def _one(query: Query, name: str, default: str | None = None) -> str | None:
    values = query.get(name)
    return values[-1] if values else default


def _flag(query: Query, name: str) -> bool:
    return (_one(query, name, "false") or "false").lower() == "true"


def _max_results(query: Query, default: int = 100, most: int = 500) -> int:
    text = _one(query, "maxResults")
    if text is None:
        return default
    if not text.isdigit():
        raise invalid_argument(f"Invalid value for maxResults: {text}")
    return max(1, min(int(text), most))


def _token(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def _untoken(text: str) -> Any:
    try:
        return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (ValueError, binascii.Error):
        raise invalid_argument("Invalid pageToken") from None


def message_format(query: Query) -> str:
    """The ``format`` of a messages.get/threads.get/drafts.get call (400 if unknown)."""
    fmt = _one(query, "format", "full") or "full"
    if fmt not in FORMATS:
        raise invalid_argument(f"Invalid value for format: {fmt}")
    return fmt


def render_message(
    message: StoredMessage, fmt: str, metadata_headers: Sequence[str] = ()
) -> dict[str, Any]:
    """A message resource in one of the four formats."""
    shown: dict[str, Any] = {
        "id": message.id,
        "threadId": message.thread_id,
        "labelIds": sorted(message.labels),
        "snippet": snippet(message.raw),
        "sizeEstimate": len(message.raw),
        "historyId": str(message.history_id),
        "internalDate": str(message.internal_date),
    }
    if fmt == "raw":
        shown["raw"] = b64url(message.raw)
    elif fmt == "metadata":
        root = parse(message.raw)
        wanted = {name.casefold() for name in metadata_headers}
        headers = [h for h in headers_of(root) if not wanted or h["name"].casefold() in wanted]
        shown["payload"] = {"mimeType": root.get_content_type(), "headers": headers}
    elif fmt == "full":
        shown["payload"] = render_part(parse(message.raw), "", message.id)
    return shown


@dataclass(frozen=True)
class Route:
    """One API method: where it lives and what it costs."""

    verb: str
    pattern: re.Pattern[str]
    quota_method: str
    handler: Callable[..., Result]


class Routes:
    """The handlers of every supported method on one mailbox."""

    def __init__(self, mailbox: Mailbox) -> None:
        self.mailbox = mailbox
        table: list[tuple[str, str, str, Callable[..., Result]]] = [
            ("GET", r"/profile", "getProfile", self.get_profile),
            ("GET", r"/labels", "labels.list", self.list_labels),
            ("POST", r"/labels", "labels.create", self.create_label),
            ("GET", r"/labels/([^/]+)", "labels.get", self.get_label),
            ("PATCH", r"/labels/([^/]+)", "labels.patch", self.patch_label),
            ("PUT", r"/labels/([^/]+)", "labels.update", self.patch_label),
            ("DELETE", r"/labels/([^/]+)", "labels.delete", self.delete_label),
            ("GET", r"/messages", "messages.list", self.list_messages),
            ("POST", r"/messages/send", "messages.send", self.send),
            ("POST", r"/messages/batchModify", "messages.batchModify", self.batch_modify),
            ("POST", r"/messages/batchDelete", "messages.batchDelete", self.batch_delete),
            ("GET", r"/messages/([^/]+)", "messages.get", self.get_message),
            ("DELETE", r"/messages/([^/]+)", "messages.delete", self.delete_message),
            ("POST", r"/messages/([^/]+)/modify", "messages.modify", self.modify),
            ("POST", r"/messages/([^/]+)/trash", "messages.trash", self.trash),
            ("POST", r"/messages/([^/]+)/untrash", "messages.untrash", self.untrash),
            (
                "GET",
                r"/messages/([^/]+)/attachments/([^/]+)",
                "messages.attachments.get",
                self.get_attachment,
            ),
            ("GET", r"/history", "history.list", self.list_history),
            ("GET", r"/threads/([^/]+)", "threads.get", self.get_thread),
            ("GET", r"/drafts", "drafts.list", self.list_drafts),
            ("POST", r"/drafts", "drafts.create", self.create_draft),
            ("POST", r"/drafts/send", "drafts.send", self.send_draft),
            ("GET", r"/drafts/([^/]+)", "drafts.get", self.get_draft),
            ("DELETE", r"/drafts/([^/]+)", "drafts.delete", self.delete_draft),
        ]
        self.table = [
            Route(verb, re.compile(pattern + "$"), method, handler)
            for verb, pattern, method, handler in table
        ]

    def find(self, verb: str, rest: str) -> tuple[Route, tuple[str, ...]]:
        """The route for ``verb`` on ``rest`` (the path after ``users/{userId}``), or 404."""
        for route in self.table:
            match = route.pattern.match(rest)
            if match is not None and route.verb == verb:
                return route, match.groups()
        raise not_found()

    # -- profile and labels -----------------------------------------------

    def get_profile(self, query: Query, body: Any) -> Result:
        box = self.mailbox
        with box.lock:
            return 200, {
                "emailAddress": box.address,
                "messagesTotal": len(box.messages),
                "threadsTotal": len({m.thread_id for m in box.messages.values()}),
                "historyId": str(box.history_id),
            }

    def list_labels(self, query: Query, body: Any) -> Result:
        with self.mailbox.lock:
            return 200, {"labels": [label.listed() for label in self.mailbox.labels.values()]}

    def _label_resource(self, label_id: str) -> dict[str, Any]:
        label = self.mailbox.label(label_id)
        shown = label.listed()
        shown.update(self.mailbox.label_counts(label_id))
        if label.color is not None:
            shown["color"] = label.color
        return shown

    def get_label(self, label_id: str, query: Query, body: Any) -> Result:
        return 200, self._label_resource(label_id)

    def create_label(self, query: Query, body: Any) -> Result:
        fields = _object(body)
        label = self.mailbox.create_label(str(fields.get("name") or ""), fields)
        return 200, self._label_resource(label.id)

    def patch_label(self, label_id: str, query: Query, body: Any) -> Result:
        label = self.mailbox.patch_label(label_id, _object(body))
        return 200, self._label_resource(label.id)

    def delete_label(self, label_id: str, query: Query, body: Any) -> Result:
        self.mailbox.delete_label(label_id)
        return 204, None

    # -- listing ----------------------------------------------------------

    def list_messages(self, query: Query, body: Any) -> Result:
        box = self.mailbox
        size = _max_results(query)
        label_ids = query.get("labelIds", [])
        with box.lock:
            names = {label.id: label.name for label in box.labels.values()}
            q = _one(query, "q", "") or ""
            parsed = parse_query(q, names)
            include_hidden = (
                _flag(query, "includeSpamTrash")
                or parsed.names_spam_or_trash
                or bool({"SPAM", "TRASH"} & set(label_ids))
            )
            matching = [
                m
                for m in box.newest_first()
                if all(label in m.labels for label in label_ids)
                and (include_hidden or not ({"SPAM", "TRASH"} & m.labels))
                and (
                    not q or parsed.matches(Candidate(frozenset(m.labels), m.internal_date, m.raw))
                )
            ]
        start = 0
        token = _one(query, "pageToken")
        if token:
            after = _untoken(token)
            if not isinstance(after, list) or len(after) != 2:
                raise invalid_argument("Invalid pageToken")
            keys = [(m.internal_date, m.id) for m in matching]
            start = sum(1 for key in keys if key >= (after[0], after[1]))
        page = matching[start : start + size]
        answer: dict[str, Any] = {}
        if page:
            answer["messages"] = [m.ref() for m in page]
        if start + size < len(matching):
            answer["nextPageToken"] = _token([page[-1].internal_date, page[-1].id])
        answer["resultSizeEstimate"] = len(matching)
        return 200, answer

    # -- one message ------------------------------------------------------

    def get_message(self, message_id: str, query: Query, body: Any) -> Result:
        fmt = message_format(query)
        with self.mailbox.lock:
            message = self.mailbox.fetchable(message_id)
            return 200, render_message(message, fmt, query.get("metadataHeaders", []))

    def get_attachment(
        self, message_id: str, attachment_id: str, query: Query, body: Any
    ) -> Result:
        with self.mailbox.lock:
            message = self.mailbox.fetchable(message_id)
            where = part_of_attachment(attachment_id)
            if where is None or where[0] != message_id:
                raise invalid_argument("Invalid attachment token")
            data = find_part(message.raw, where[1])
        if data is None:
            raise not_found()
        return 200, {"attachmentId": attachment_id, "size": len(data), "data": b64url(data)}

    def _labels_argument(self, fields: dict[str, Any], name: str) -> list[str]:
        value = fields.get(name) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise invalid_argument(f"Invalid value for {name}")
        if len(value) > MAX_MODIFY_LABELS:
            raise invalid_argument(f"Too many label ids in {name}")
        return value

    def modify(self, message_id: str, query: Query, body: Any) -> Result:
        fields = _object(body)
        add = self._labels_argument(fields, "addLabelIds")
        remove = self._labels_argument(fields, "removeLabelIds")
        with self.mailbox.lock:
            self.mailbox.fetchable(message_id)
            message = self.mailbox.change_labels(message_id, add, remove)
            return 200, message.labelled_ref()

    def trash(self, message_id: str, query: Query, body: Any) -> Result:
        with self.mailbox.lock:
            self.mailbox.fetchable(message_id)
            message = self.mailbox.change_labels(message_id, ["TRASH"], by_client=False)
            return 200, message.labelled_ref()

    def untrash(self, message_id: str, query: Query, body: Any) -> Result:
        with self.mailbox.lock:
            self.mailbox.fetchable(message_id)
            message = self.mailbox.change_labels(message_id, (), ["TRASH"], by_client=False)
            return 200, message.labelled_ref()

    def delete_message(self, message_id: str, query: Query, body: Any) -> Result:
        self.mailbox.delete(message_id)
        return 204, None

    def _ids_argument(self, fields: dict[str, Any]) -> list[str]:
        ids = fields.get("ids") or []
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise invalid_argument("Invalid value for ids")
        if len(ids) > MAX_BATCH_IDS:
            raise invalid_argument(f"Too many ids: at most {MAX_BATCH_IDS} per request")
        return ids

    def batch_modify(self, query: Query, body: Any) -> Result:
        fields = _object(body)
        ids = self._ids_argument(fields)
        add = self._labels_argument(fields, "addLabelIds")
        remove = self._labels_argument(fields, "removeLabelIds")
        with self.mailbox.lock:
            self.mailbox._check_labels(set(add) | set(remove), by_client=True)
            for message_id in ids:
                if message_id in self.mailbox.messages:  # unknown ids are skipped
                    self.mailbox.change_labels(message_id, add, remove)
        return 204, None

    def batch_delete(self, query: Query, body: Any) -> Result:
        ids = self._ids_argument(_object(body))
        with self.mailbox.lock:
            for message_id in ids:
                if message_id in self.mailbox.messages:
                    self.mailbox.delete(message_id)
        return 204, None

    def send(self, query: Query, body: Any) -> Result:
        raw, thread_id = _raw_message(_object(body))
        _require_recipients(raw)
        box = self.mailbox
        with box.lock:
            thread = box.thread_for_sending(raw, thread_id)
            message = box.add(raw, ["SENT"], thread_id=thread)
            return 200, message.labelled_ref()

    # -- history and threads ----------------------------------------------

    def list_history(self, query: Query, body: Any) -> Result:
        start_text = _one(query, "startHistoryId")
        if not start_text or not start_text.isdigit():
            raise invalid_argument("Invalid startHistoryId")
        types = set(query.get("historyTypes", [])) or set(HISTORY_TYPES)
        if types - HISTORY_TYPES:
            raise invalid_argument(f"Invalid value for historyTypes: {sorted(types)[0]}")
        label_id = _one(query, "labelId")
        size = _max_results(query)
        start = int(start_text)
        token = _one(query, "pageToken")
        if token:
            after = _untoken(token)
            if not isinstance(after, int):
                raise invalid_argument("Invalid pageToken")
            start = max(start, after)
        shown: list[dict[str, Any]] = []
        more = False
        last_id = start
        with self.mailbox.lock:
            for record in self.mailbox.history_after(start):
                rendered = _render_record(record, types, label_id)
                if rendered is None:
                    continue
                if len(shown) == size:
                    more = True
                    break
                shown.append(rendered)
                last_id = record.id
            current = self.mailbox.history_id
        answer: dict[str, Any] = {}
        if shown:
            answer["history"] = shown
        if more:
            answer["nextPageToken"] = _token(last_id)
        answer["historyId"] = str(current)
        return 200, answer

    def get_thread(self, thread_id: str, query: Query, body: Any) -> Result:
        fmt = message_format(query)
        headers = query.get("metadataHeaders", [])
        with self.mailbox.lock:
            members = [m for m in self.mailbox.thread(thread_id) if not m.unfetchable]
            if not members:
                raise not_found()
            return 200, {
                "id": thread_id,
                "historyId": str(max(m.history_id for m in members)),
                "messages": [render_message(m, fmt, headers) for m in members],
            }

    # -- drafts -----------------------------------------------------------

    def _draft_resource(self, draft_id: str, fmt: str | None) -> dict[str, Any]:
        draft = self.mailbox.draft(draft_id)
        message = self.mailbox.message(draft.message_id)
        shown = message.labelled_ref() if fmt is None else render_message(message, fmt)
        return {"id": draft.id, "message": shown}

    def list_drafts(self, query: Query, body: Any) -> Result:
        size = _max_results(query)
        token = _one(query, "pageToken")
        start = _untoken(token) if token else 0
        if not isinstance(start, int):
            raise invalid_argument("Invalid pageToken")
        with self.mailbox.lock:
            drafts = sorted(
                self.mailbox.drafts.values(),
                key=lambda d: self.mailbox.messages[d.message_id].internal_date,
                reverse=True,
            )
            page = drafts[start : start + size]
            answer: dict[str, Any] = {}
            if page:
                answer["drafts"] = [
                    {"id": d.id, "message": self.mailbox.messages[d.message_id].ref()} for d in page
                ]
            if start + size < len(drafts):
                answer["nextPageToken"] = _token(start + size)
            answer["resultSizeEstimate"] = len(drafts)
            return 200, answer

    def create_draft(self, query: Query, body: Any) -> Result:
        raw, thread_id = _raw_message(_object(_object(body).get("message")))
        with self.mailbox.lock:
            draft = self.mailbox.create_draft(raw, thread_id)
            return 200, self._draft_resource(draft.id, None)

    def get_draft(self, draft_id: str, query: Query, body: Any) -> Result:
        fmt = message_format(query)
        with self.mailbox.lock:
            return 200, self._draft_resource(draft_id, fmt)

    def send_draft(self, query: Query, body: Any) -> Result:
        draft_id = _object(body).get("id")
        if not isinstance(draft_id, str) or not draft_id:
            raise invalid_argument("Invalid draft id")
        with self.mailbox.lock:
            draft = self.mailbox.draft(draft_id)
            _require_recipients(self.mailbox.message(draft.message_id).raw)
            message = self.mailbox.send_draft(draft_id)
            return 200, message.labelled_ref()

    def delete_draft(self, draft_id: str, query: Query, body: Any) -> Result:
        with self.mailbox.lock:
            draft = self.mailbox.draft(draft_id)
            self.mailbox.delete(draft.message_id)
        return 204, None


def _object(body: Any) -> dict[str, Any]:
    if body is None:
        return {}
    if not isinstance(body, dict):
        raise invalid_argument("Invalid JSON payload received.")
    return body


def _raw_message(fields: dict[str, Any]) -> tuple[bytes, str | None]:
    raw_text = fields.get("raw")
    if not isinstance(raw_text, str) or not raw_text:
        raise invalid_argument(
            "'raw' RFC822 payload message string or uploading message via /upload/* URL required"
        )
    try:
        raw = from_b64url(raw_text)
    except (ValueError, binascii.Error):
        raise invalid_argument("Invalid value for ByteString") from None
    thread_id = fields.get("threadId")
    return raw, thread_id if isinstance(thread_id, str) and thread_id else None


def _require_recipients(raw: bytes) -> None:
    message = parse(raw)
    if not any(message.get(name) for name in ("To", "Cc", "Bcc")):
        raise failed_precondition("Recipient address required")


def _render_record(record: Any, types: set[str], label_id: str | None) -> dict[str, Any] | None:
    rendered: dict[str, Any] = {"id": str(record.id), "messages": [record.message]}
    shown = False
    for event in record.events:
        if event.kind not in types:
            continue
        if label_id is not None:
            concerned = event.labels if event.kind.startswith("label") else record.message_labels
            if label_id not in concerned:
                continue
        entry: dict[str, Any] = {
            "message": {**record.message, "labelIds": list(record.message_labels)}
        }
        if event.kind.startswith("label"):
            entry["labelIds"] = list(event.labels)
        rendered.setdefault(HISTORY_KEYS[event.kind], []).append(entry)
        shown = True
    return rendered if shown else None


__all__ = ["ApiError", "Routes", "render_message"]
