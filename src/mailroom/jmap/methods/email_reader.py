"""Email objects as RFC 8621 §4.1 draws them, shared by ``Email/get`` and ``Email/set``.

:class:`EmailReader` loads only the columns, labels, stored headers and raw
bytes that the requested properties need; ``Email/set`` uses its labels and
keywords to tell what an update changed. Raw messages are read a few megabytes
at a time, and a large one alone inside a heavy-work slot (see
:mod:`mailroom.jmap.bodies`), so big mail cannot exhaust memory.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Generator, Iterable, Iterator, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.categories.tabs import HELD
from mailroom.crypto.mail_reading import open_blob
from mailroom.crypto.message_fields import SEALED_COLUMNS
from mailroom.jmap import ids
from mailroom.jmap.bodies import (
    DEFAULT_BODY_PROPERTIES,
    DEFAULT_STRUCTURE_PROPERTIES,
    HEAVY_MESSAGE_BYTES,
    Structure,
    body_part,
    body_value,
    heavy_work,
    parse_header_block,
    parse_structure,
    text_leaves,
)
from mailroom.jmap.header_forms import as_date, header_property, raw_fields
from mailroom.jmap.mapping import role_labels
from mailroom.jmap.methods.common import utc_date
from mailroom.jmap.scope import owned_by
from mailroom.jmap.sealed_columns import message_ids_of, opened
from mailroom.labels.keywords import FLAGGED, SEEN, stored_keywords
from mailroom.mime.msgids import parse_id_list
from mailroom.mime.structure import Part
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
# Read from the stored (decoded) header list; `headers` and `header:` read the raw bytes.
_HEADER_PROPERTIES = frozenset({"inReplyTo", "references", "sentAt"})
# Properties RFC 8621 defines as a header form, read from the raw bytes (an
# encoded comma in a display name must not split an address).
_RAW_HEADER_FORMS = {"sender": "header:Sender:asAddresses"}
# Small raw messages are read together up to this many bytes per query.
_RAW_BATCH_BYTES = 4_000_000
_BODY_PROPERTIES = frozenset({"bodyStructure", "bodyValues", "textBody", "htmlBody", "attachments"})


def _addresses(pairs: Iterable[Any]) -> list[dict[str, Any]] | None:
    out = [
        {"name": pair[0] or None, "email": pair[1]}
        for pair in pairs
        if isinstance(pair, list | tuple) and len(pair) == 2 and pair[1]
    ]
    return out or None


@dataclass(frozen=True, slots=True)
class BodyRequest:
    """The body arguments of one Email/get: which part properties and body values."""

    properties: Sequence[str] | None
    fetch_text: bool
    fetch_html: bool
    fetch_all: bool
    max_bytes: int

    def value(self, structure: Structure | None, name: str) -> Any:
        """One body property of an email (``None`` structure: no raw bytes kept)."""
        if structure is None:
            return {} if name == "bodyValues" else ([] if name != "bodyStructure" else None)
        if name == "bodyStructure":
            tree = DEFAULT_STRUCTURE_PROPERTIES if self.properties is None else self.properties
            return body_part(structure, structure.root, tree)
        properties = DEFAULT_BODY_PROPERTIES if self.properties is None else self.properties
        if name == "textBody":
            return [body_part(structure, p, properties) for p in structure.text_parts]
        if name == "htmlBody":
            return [body_part(structure, p, properties) for p in structure.html_parts]
        if name == "attachments":
            return [body_part(structure, p, properties) for p in structure.attachments]
        chosen: list[Part] = []
        if self.fetch_all:
            chosen = text_leaves(structure)
        else:
            if self.fetch_text:
                chosen += structure.text_parts
            if self.fetch_html:
                chosen += structure.html_parts
        values: dict[str, Any] = {}
        for part in chosen:
            if part.path not in values and part.ctype.startswith("text/"):
                values[part.path] = body_value(structure, part, self.max_bytes)
        return values


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

    def keywords(self, seen: bool, labels: set[int], stored: Iterable[str] = ()) -> dict[str, bool]:
        """The keywords a message shows: ``$seen``, ``$flagged`` and its stored ones, sorted."""
        keywords = set(stored)
        if seen:
            keywords.add(SEEN)
        if self.roles.get("starred") in labels:
            keywords.add(FLAGGED)
        return {keyword: True for keyword in sorted(keywords)}

    def read(
        self,
        message_ids: list[int],
        properties: list[str],
        *,
        body_properties: Sequence[str] | None = None,
        fetch_text: bool = False,
        fetch_html: bool = False,
        fetch_all: bool = False,
        max_bytes: int = 0,
    ) -> dict[int, dict[str, Any]]:
        """Email objects by message id (messages of other users are simply absent).

        ``body_properties`` None is RFC 8621's default list (with ``subParts``
        added for ``bodyStructure``, whose tree is otherwise lost).
        """
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
        rows: list[Any] = list(
            self.session.execute(
                select(*columns, Message.user_id, Message.sealed).where(
                    Message.id.in_(message_ids), owned_by(Message.user_id, self.user_id)
                )
            ).all()
        )
        sealed_ids = [row.id for row in rows if row.sealed]
        if sealed_ids:  # mail columns opened; the Message-ID from the sealed header list
            rows = opened(self.session, rows, [c.key for c in columns if c.key in SEALED_COLUMNS])
            if "messageId" in wanted:
                header_ids = message_ids_of(self.session, sealed_ids)
                for row in rows:
                    if row.sealed:
                        row.message_id_header = header_ids.get(row.id)
        messages = {row.id: row for row in rows}
        found = list(messages)
        labels = self.labels(found) if wanted & {"mailboxIds", "keywords"} else {}
        stored = stored_keywords(self.session, found) if "keywords" in wanted else {}
        headers: dict[int, list[list[str]]] = {}
        if wanted & _HEADER_PROPERTIES:
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
                    obj[name] = self.keywords(
                        message.seen_at is not None, labels.get(mid, set()), stored.get(mid, ())
                    )
                elif name == "size":
                    obj[name] = message.size
                elif name == "receivedAt":
                    obj[name] = utc_date(message.received_at)
                elif name == "sentAt":  # header:Date:asDate, the sender's offset kept
                    dates = [v for k, v in fields if k.lower() == "date"]
                    if mid not in headers:  # no stored header list: the parsed column, in UTC
                        obj[name] = utc_date(message.sent_at)
                    else:
                        obj[name] = as_date(dates[-1]) if dates else None
                elif name == "messageId":
                    obj[name] = [message.message_id_header] if message.message_id_header else None
                elif name in ("inReplyTo", "references"):
                    header = "in-reply-to" if name == "inReplyTo" else "references"
                    values = [v for k, v in fields if k.lower() == header]
                    obj[name] = parse_id_list(values[-1]) or None if values else None
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
                elif name in ("headers", *_RAW_HEADER_FORMS) or name.startswith("header:"):
                    obj[name] = None  # filled below from the raw bytes
                elif name == "category":  # null while held: not in any tab the session lists
                    category = categories.get(mid)
                    obj[name] = None if category == HELD else category
                elif name in _BODY_PROPERTIES:
                    obj[name] = None  # filled below, one message at a time
            out[mid] = obj
        raw_names = [
            name
            for name in properties
            if name in (*_BODY_PROPERTIES, "headers", *_RAW_HEADER_FORMS)
            or name.startswith("header:")
        ]
        if raw_names:
            self._fill_from_raw(
                out,
                raw_names,
                BodyRequest(body_properties, fetch_text, fetch_html, fetch_all, max_bytes),
            )
        return out

    def _fill_from_raw(
        self, out: dict[int, dict[str, Any]], names: list[str], request: BodyRequest
    ) -> None:
        """Fill the header and body properties of each email from its raw bytes."""
        seen: set[int] = set()
        needs_tree = any(name in _BODY_PROPERTIES for name in names)
        # closing(): a large message's heavy-work slot is held across the
        # yield and must be released even if building its parts fails.
        with closing(self._raw_messages(list(out))) as raws:
            for mid, data in raws:
                seen.add(mid)
                structure = parse_structure(mid, data) if needs_tree else None
                fields = raw_fields(structure.root.msg if structure else parse_header_block(data))
                for name in names:
                    if name == "headers":
                        out[mid][name] = [{"name": k, "value": v} for k, v in fields]
                    elif name.startswith("header:") or name in _RAW_HEADER_FORMS:
                        out[mid][name] = header_property(_RAW_HEADER_FORMS.get(name, name)).pick(
                            fields
                        )
                    else:
                        out[mid][name] = request.value(structure, name)
                del structure, data
        for mid in set(out) - seen:  # no raw bytes kept
            for name in names:
                if name == "headers":
                    out[mid][name] = []
                elif name.startswith("header:") or name in _RAW_HEADER_FORMS:
                    out[mid][name] = header_property(_RAW_HEADER_FORMS.get(name, name)).pick([])
                else:
                    out[mid][name] = request.value(None, name)

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
                select(Message.id, Blob.sha256, Blob.data, Blob.user_id)
                .join(Blob, Blob.sha256 == Message.raw_sha256)
                .where(Message.id.in_(message_ids))
            ).all()
        )
        while rows:  # pop: each message's bytes are freed once it is done
            mid, key, data, owner = rows.pop()
            opened = open_blob(self.session, key, data, owner)
            if opened is not None:
                yield mid, opened
