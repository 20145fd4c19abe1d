"""Email objects as RFC 8621 §4.1 draws them, shared by ``Email/get`` and ``Email/set``.

:class:`EmailReader` loads only the columns, labels, stored headers and raw
bytes that the requested properties need; ``Email/set`` uses its labels and
keywords to tell what an update changed. Raw messages are read a few megabytes
at a time, and a large one alone inside a heavy-work slot (see
:mod:`mailroom.jmap.bodies`), so big mail cannot exhaust memory.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Generator, Iterable, Iterator
from contextlib import closing
from email.utils import parsedate_to_datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.jmap import ids
from mailroom.jmap.bodies import (
    DEFAULT_BODY_PROPERTIES,
    HEAVY_MESSAGE_BYTES,
    Structure,
    body_part,
    body_value,
    heavy_work,
    parse_structure,
)
from mailroom.jmap.errors import invalid_arguments
from mailroom.jmap.mapping import role_labels
from mailroom.jmap.methods.common import utc_date
from mailroom.jmap.scope import owned_by
from mailroom.mime.addresses import parse_address_list
from mailroom.mime.msgids import parse_id_list
from mailroom.store.headers import stored_headers
from mailroom.store.models import Blob, Message, MessageLabel

DEFAULT_PROPERTIES = (
    "id",
    "blobId",
    "threadId",
    "mailboxIds",
    "keywords",
    "size",
    "receivedAt",
    "messageId",
    "inReplyTo",
    "references",
    "sender",
    "from",
    "to",
    "cc",
    "bcc",
    "replyTo",
    "subject",
    "sentAt",
    "hasAttachment",
    "preview",
    "bodyValues",
    "textBody",
    "htmlBody",
    "attachments",
)
PROPERTIES = frozenset({*DEFAULT_PROPERTIES, "headers", "bodyStructure"})
TAB_PROPERTIES = frozenset({"category"})
_HEADER_PROPERTIES = frozenset({"inReplyTo", "references", "sender", "headers"})
# Small raw messages are read together up to this many bytes per query.
_RAW_BATCH_BYTES = 4_000_000
_BODY_PROPERTIES = frozenset({"bodyStructure", "bodyValues", "textBody", "htmlBody", "attachments"})
_HEADER_FORMS = frozenset({"asRaw", "asText", "asAddresses", "asMessageIds", "asDate", "asURLs"})


def _addresses(pairs: Iterable[Any]) -> list[dict[str, Any]] | None:
    out = [
        {"name": pair[0] or None, "email": pair[1]}
        for pair in pairs
        if isinstance(pair, list | tuple) and len(pair) == 2 and pair[1]
    ]
    return out or None


def header_property(name: str) -> tuple[str, str, bool]:
    """Split ``header:Name[:form][:all]``; invalidArguments for a form not offered."""
    parts = name.split(":")
    if len(parts) < 2 or not parts[1]:
        raise invalid_arguments(f"Bad header property {name!r}.")
    field, rest = parts[1], parts[2:]
    every = bool(rest) and rest[-1] == "all"
    if every:
        rest = rest[:-1]
    form = rest[0] if rest else "asRaw"
    if len(rest) > 1 or form not in _HEADER_FORMS:
        raise invalid_arguments(f"The header form of {name!r} is not supported.")
    return field.lower(), form, every


def _header_value(value: str, form: str) -> Any:
    if form in ("asRaw", "asText"):
        return value.strip() if form == "asText" else value
    if form == "asAddresses":
        return [{"name": a.name or None, "email": a.email} for a in parse_address_list(value)]
    if form == "asMessageIds":
        return parse_id_list(value) or None
    if form == "asDate":
        try:
            return utc_date(parsedate_to_datetime(value.strip()))
        except (TypeError, ValueError, IndexError):
            return None
    urls = [part.strip()[1:-1] for part in value.split(",") if part.strip().startswith("<")]
    return urls or None


class EmailReader:
    """Builds Email objects of one user, loading only what the properties need."""

    def __init__(self, session: Session, user_id: int, *, tabs: bool = False) -> None:
        self.session = session
        self.user_id = user_id
        self.tabs = tabs
        self.roles = role_labels(session, user_id)

    def labels(self, message_ids: list[int]) -> dict[int, set[int]]:
        """The label ids of each message."""
        labels: dict[int, set[int]] = defaultdict(set)
        if message_ids:
            for mid, lid in self.session.execute(
                select(MessageLabel.message_id, MessageLabel.label_id).where(
                    MessageLabel.message_id.in_(message_ids)
                )
            ):
                labels[mid].add(lid)
        return labels

    def keywords(self, seen: bool, labels: set[int]) -> dict[str, bool]:
        """The keywords a message shows."""
        keywords: dict[str, bool] = {}
        if seen:
            keywords["$seen"] = True
        if self.roles.get("starred") in labels:
            keywords["$flagged"] = True
        if self.roles.get("drafts") in labels:
            keywords["$draft"] = True
        return keywords

    def read(
        self,
        message_ids: list[int],
        properties: list[str],
        *,
        body_properties: tuple[str, ...] | list[str] = DEFAULT_BODY_PROPERTIES,
        fetch_text: bool = False,
        fetch_html: bool = False,
        fetch_all: bool = False,
        max_bytes: int = 0,
    ) -> dict[int, dict[str, Any]]:
        """Email objects by message id (messages of other users are simply absent)."""
        if not message_ids:
            return {}
        wanted = set(properties)
        columns: list[Any] = [
            Message.id,
            Message.thread_id,
            Message.seen_at,
            Message.size,
            Message.received_at,
            Message.sent_at,
            Message.message_id_header,
            Message.from_name,
            Message.from_email,
            Message.subject,
            Message.has_attachment,
            Message.preview,
            Message.category,
        ]
        if wanted & {"to", "cc", "bcc", "replyTo"}:
            columns.append(Message.recipients)
        messages = {
            row.id: row
            for row in self.session.execute(
                select(*columns).where(
                    Message.id.in_(message_ids), owned_by(Message.user_id, self.user_id)
                )
            )
        }
        found = list(messages)
        labels = self.labels(found) if wanted & {"mailboxIds", "keywords"} else {}
        headers: dict[int, list[list[str]]] = {}
        if wanted & _HEADER_PROPERTIES or any(p.startswith("header:") for p in wanted):
            headers = stored_headers(self.session, found)
        categories: dict[int, str | None] = {}
        if self.tabs and "category" in wanted:
            from mailroom.store.models import Thread

            thread_ids = [m.thread_id for m in messages.values() if m.thread_id is not None]
            by_thread = {
                tid: category
                for tid, category in self.session.execute(
                    select(Thread.id, Thread.category).where(Thread.id.in_(thread_ids))
                )
            }
            categories = {
                m.id: by_thread.get(m.thread_id) if m.thread_id else m.category
                for m in messages.values()
            }
        out: dict[int, dict[str, Any]] = {}
        for mid, message in messages.items():
            fields = headers.get(mid, [])
            obj: dict[str, Any] = {}
            for name in properties:
                if name == "id":
                    obj[name] = ids.email_id(mid)
                elif name == "blobId":
                    obj[name] = ids.raw_blob_id(mid)
                elif name == "threadId":
                    obj[name] = ids.thread_id(message.thread_id, mid)
                elif name == "mailboxIds":
                    obj[name] = {ids.mailbox_id(lid): True for lid in sorted(labels.get(mid, ()))}
                elif name == "keywords":
                    obj[name] = self.keywords(message.seen_at is not None, labels.get(mid, set()))
                elif name == "size":
                    obj[name] = message.size
                elif name == "receivedAt":
                    obj[name] = utc_date(message.received_at)
                elif name == "sentAt":
                    obj[name] = utc_date(message.sent_at)
                elif name == "messageId":
                    obj[name] = [message.message_id_header] if message.message_id_header else None
                elif name in ("inReplyTo", "references"):
                    header = "in-reply-to" if name == "inReplyTo" else "references"
                    values = [v for k, v in fields if k.lower() == header]
                    obj[name] = parse_id_list(values[-1]) or None if values else None
                elif name == "sender":
                    values = [v for k, v in fields if k.lower() == "sender"]
                    obj[name] = (
                        _addresses([[a.name, a.email] for a in parse_address_list(values[-1])])
                        if values
                        else None
                    )
                elif name == "from":
                    obj[name] = _addresses([[message.from_name, message.from_email]])
                elif name in ("to", "cc", "bcc", "replyTo"):
                    key = "reply_to" if name == "replyTo" else name
                    obj[name] = _addresses(message.recipients.get(key, []))
                elif name == "subject":
                    obj[name] = message.subject
                elif name == "hasAttachment":
                    obj[name] = message.has_attachment
                elif name == "preview":
                    obj[name] = message.preview
                elif name == "headers":
                    obj[name] = [{"name": k, "value": v} for k, v in fields]
                elif name.startswith("header:"):
                    field, form, every = header_property(name)
                    values = [v for k, v in fields if k.lower() == field]
                    if every:
                        obj[name] = [_header_value(v, form) for v in values]
                    else:
                        obj[name] = _header_value(values[-1], form) if values else None
                elif name == "category":
                    obj[name] = categories.get(mid)
                elif name in _BODY_PROPERTIES:
                    obj[name] = None  # filled below, one message at a time
            out[mid] = obj
        body_names = [name for name in properties if name in _BODY_PROPERTIES]
        if body_names:
            seen: set[int] = set()
            # closing(): a large message's heavy-work slot is held across the
            # yield and must be released even if building its parts fails.
            with closing(self._raw_messages(found)) as raws:
                for mid, data in raws:
                    seen.add(mid)
                    structure = parse_structure(mid, data)
                    for name in body_names:
                        out[mid][name] = self._body(
                            structure,
                            name,
                            tuple(body_properties),
                            fetch_text,
                            fetch_html,
                            fetch_all,
                            max_bytes,
                        )
                    del structure, data
            for mid in set(found) - seen:  # no raw bytes kept
                for name in body_names:
                    out[mid][name] = self._body(
                        None, name, (), fetch_text, fetch_html, fetch_all, max_bytes
                    )
        return out

    def _raw_messages(self, message_ids: list[int]) -> Generator[tuple[int, bytes], None, None]:
        """The raw bytes of messages, read a few megabytes at a time.

        A large message is read alone while holding a heavy-work slot, so
        several requests for it never hold more than a few copies at once.
        """
        sizes = self.session.execute(
            select(Message.id, Blob.size)
            .join(Blob, Blob.sha256 == Message.raw_sha256)
            .where(Message.id.in_(message_ids))
        ).all()
        batch: list[int] = []
        total = 0
        for mid, size in sizes:
            if size > HEAVY_MESSAGE_BYTES:
                with heavy_work(size):
                    yield from self._read_raw([mid])
                continue
            if batch and total + size > _RAW_BATCH_BYTES:
                yield from self._read_raw(batch)
                batch, total = [], 0
            batch.append(mid)
            total += size
        if batch:
            yield from self._read_raw(batch)

    def _read_raw(self, message_ids: list[int]) -> Iterator[tuple[int, bytes]]:
        rows = list(
            self.session.execute(
                select(Message.id, Blob.data)
                .join(Blob, Blob.sha256 == Message.raw_sha256)
                .where(Message.id.in_(message_ids))
            ).all()
        )
        while rows:  # pop: each message's bytes are freed once it is done
            mid, data = rows.pop()
            yield mid, data

    @staticmethod
    def _body(
        structure: Structure | None,
        name: str,
        properties: tuple[str, ...],
        fetch_text: bool,
        fetch_html: bool,
        fetch_all: bool,
        max_bytes: int,
    ) -> Any:
        if structure is None:
            return {} if name == "bodyValues" else ([] if name != "bodyStructure" else None)
        if name == "bodyStructure":
            return body_part(structure, structure.root, properties)
        if name == "textBody":
            return [body_part(structure, p, properties) for p in structure.text_parts]
        if name == "htmlBody":
            return [body_part(structure, p, properties) for p in structure.html_parts]
        if name == "attachments":
            return [body_part(structure, p, properties) for p in structure.attachments]
        chosen = []
        if fetch_text or fetch_all:
            chosen += structure.text_parts
        if fetch_html or fetch_all:
            chosen += structure.html_parts
        values: dict[str, Any] = {}
        for part in chosen:
            if part.path not in values and part.ctype.startswith("text/"):
                values[part.path] = body_value(part, max_bytes)
        return values
