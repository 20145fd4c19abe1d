"""The records :func:`mailroom.mime.parse_message` returns.

Invariants (guaranteed by the parser, relied on by ingest):
    * Every string field encodes to UTF-8 and holds no U+0000 (safe for PostgreSQL ``text``).
    * ``ParsedMessage.date`` is ``None`` or timezone-aware UTC.
    * Address lists never hold an ``Address`` with an empty ``email``.
    * ``sanitized_html`` is the only HTML that may ever be rendered; ``html_body`` is raw.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from mailroom.mime.addresses import Address

__all__ = ["Address", "Attachment", "ParsedMessage"]


@dataclass(frozen=True, slots=True)
class Attachment:
    """A leaf MIME part shown as an attachment (or an inline image), located by ``part_path``.

    ``part_path`` is the IMAP BODYSTRUCTURE part number ("1", "2.1", ...): a single-part
    message's body is "1"; the children of a multipart are numbered from 1 under their
    parent's number. ``size`` is the decoded payload size in bytes.
    """

    filename: str | None
    content_type: str
    size: int
    content_id: str | None
    disposition: str | None
    part_path: str

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle as a plain tuple (see ``ParsedMessage.__reduce__``)."""
        return (
            Attachment,
            (
                self.filename,
                self.content_type,
                self.size,
                self.content_id,
                self.disposition,
                self.part_path,
            ),
        )


@dataclass(slots=True)
class ParsedMessage:
    """Everything ingest needs from one raw RFC 5322 message."""

    subject: str = ""
    from_: list[Address] = field(default_factory=list)
    sender: Address | None = None
    to: list[Address] = field(default_factory=list)
    cc: list[Address] = field(default_factory=list)
    bcc: list[Address] = field(default_factory=list)
    reply_to: list[Address] = field(default_factory=list)
    date: datetime | None = None
    message_id: str | None = None
    in_reply_to: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    headers: list[tuple[str, str]] = field(default_factory=list)
    text_body: str = ""
    html_body: str | None = None
    sanitized_html: str | None = None
    preview: str = ""
    attachments: list[Attachment] = field(default_factory=list)
    size: int = 0
    notes: list[str] = field(default_factory=list)
    # The message's blind index entry (``crypto.blind_tokens.BlindEntry``: key version, header
    # and body token words, words new to the worker), made by the parse worker when the import
    # seals mail, so the writer only stores it; None otherwise.
    blind_entry: tuple[int, str, str, str] | None = field(default=None, compare=False)

    def participants(self) -> str:
        """The searchable text of the sender and recipients: names, addresses, their halves."""
        words: list[str] = []
        for address in [*self.from_, *self.to, *self.cc, *self.bcc]:
            local, _, domain = address.email.partition("@")
            words.extend((address.name, address.email, local, domain))
        return " ".join(word for word in words if word)

    def header(self, name: str) -> str | None:
        """Return the decoded value of the first header called ``name`` (any case), or None."""
        wanted = name.lower()
        for key, value in self.headers:
            if key.lower() == wanted:
                return value
        return None

    def header_all(self, name: str) -> list[str]:
        """Return the decoded values of every header called ``name`` (any case), in order."""
        wanted = name.lower()
        return [value for key, value in self.headers if key.lower() == wanted]

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickle compactly: parse workers send thousands of these to the importing process.

        Headers and addresses travel as flat strings joined by U+0000 (which no
        string here holds): unpickling tuples and frozen objects one by one
        costs the receiver more than the parsing of some messages.
        """
        values = [getattr(self, name) for name in _FIELDS]
        for index in _ADDRESS_LISTS:
            values[index] = _pack(a for address in values[index] for a in address.pair())
        values[_SENDER] = self.sender.pair() if self.sender else None
        values[_HEADERS] = _pack(v for pair in self.headers for v in pair)
        return (_unpickle, (values,))


_FIELDS = [f.name for f in fields(ParsedMessage)]
_ADDRESS_LISTS = [_FIELDS.index(name) for name in ("from_", "to", "cc", "bcc", "reply_to")]
_SENDER = _FIELDS.index("sender")
_HEADERS = _FIELDS.index("headers")


def _pack(strings: Any) -> str | None:
    joined = "\x00".join(strings)
    return joined if joined else None


def _pairs(packed: str | None) -> list[tuple[str, str]]:
    if packed is None:
        return []
    items = iter(packed.split("\x00"))
    return list(zip(items, items, strict=True))


def _unpickle(values: list[Any]) -> ParsedMessage:
    for index in _ADDRESS_LISTS:
        values[index] = [Address(name, email) for name, email in _pairs(values[index])]
    if values[_SENDER] is not None:
        values[_SENDER] = Address(*values[_SENDER])
    values[_HEADERS] = _pairs(values[_HEADERS])
    return ParsedMessage(*values)
