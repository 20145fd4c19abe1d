"""What the submission port does to a message before it is queued (RFC 6409 section 8).

The bytes are kept as the mail program wrote them, but for the header
section, which is edited line by line (never re-serialised):

* ``X-Mailroom-Kind: KIND`` is removed; its value is the kind of mail that
  picks the lane (:func:`mailroom.outbound.lanes.lane_for`; none: ``calm``).
* ``Message-ID`` and ``Date`` are added when missing (sections 8.2 and 8.3),
  the Message-ID on the domain of the sender's address.
* A ``Received`` trace field is put on top (RFC 5321 section 4.4), naming the
  client and ``ESMTPA``/``ESMTPSA`` (RFC 3848).

:func:`prepare` also reads the addresses of ``From`` and ``Sender``, which the
port checks against the user's identities. A message the port cannot take
raises :class:`MessageRefused` with one sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from email.utils import format_datetime

from mailroom.errors import MailroomError
from mailroom.mime.addresses import parse_address_list
from mailroom.mime.compose import new_message_id

__all__ = ["KIND_HEADER", "MessageRefused", "Prepared", "prepare"]

KIND_HEADER = "X-Mailroom-Kind"
_KIND = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_FIELD_NAME = re.compile(rb"([!-9;-~]+)[ \t]*:")


class MessageRefused(MailroomError):
    """The submitted message cannot be queued as it is (one sentence for the client)."""


@dataclass(frozen=True)
class Prepared:
    """A submitted message ready to queue: its bytes, kind and author addresses."""

    raw: bytes
    kind: str | None
    authors: tuple[str, ...]  # the From addresses, then the Sender address, as written


@dataclass(frozen=True)
class _Field:
    name: str  # lower case
    lines: bytes  # the whole field with its continuation lines and line ends

    @property
    def value(self) -> str:
        """The unfolded value, decoded leniently (RFC 6532 allows UTF-8)."""
        _, _, value = self.lines.partition(b":")
        text = value.decode("utf-8", "replace")
        return re.sub(r"\r?\n(?=[ \t])", "", text).strip()


def prepare(raw: bytes, *, client: str, helo: str, by: str, tls: bool, now: datetime) -> Prepared:
    """The message as queued (see the module docstring); MessageRefused when it cannot be."""
    head, body = _split(raw)
    newline = b"\r\n" if b"\r\n" in head or not head else b"\n"
    fields = _fields(head)
    kinds = [f.value for f in fields if f.name == KIND_HEADER.lower()]
    kind = kinds[0] if kinds else None
    if kind is not None and not _KIND.fullmatch(kind):
        raise MessageRefused(
            f"The {KIND_HEADER} header {kind[:64]!r} is not a kind of mail; "
            "use letters, digits, dots, dashes and underscores."
        )
    authors = _addresses(fields, "from")
    if not authors:
        raise MessageRefused("The message has no From address; write one of yours in From.")
    authors += _addresses(fields, "sender")
    names = {f.name for f in fields}
    added: list[str] = [
        f"Received: from {_token(helo)} ([{client}]) by {_token(by)} (mailroom) "
        f"with {'ESMTPSA' if tls else 'ESMTPA'}; {format_datetime(now)}"
    ]
    if "message-id" not in names:
        domain = authors[0].rpartition("@")[2]
        added.append(f"Message-ID: <{new_message_id(domain)}>")
    if "date" not in names:
        added.append(f"Date: {format_datetime(now)}")
    kept = b"".join(f.lines for f in fields if f.name != KIND_HEADER.lower())
    top = b"".join(line.encode("ascii", "replace") + newline for line in added)
    return Prepared(top + kept + body, kind, tuple(authors))


def _split(raw: bytes) -> tuple[bytes, bytes]:
    """The header section (with its last line end) and the rest, blank line included."""
    if raw.startswith((b"\r\n", b"\n")):
        return b"", raw
    for blank in (b"\r\n\r\n", b"\n\n"):
        at = raw.find(blank)
        if at >= 0:
            cut = at + len(blank) // 2
            return raw[:cut], raw[cut:]
    if raw and not raw.endswith(b"\n"):
        raw += b"\r\n"
    return raw, b""


def _fields(head: bytes) -> list[_Field]:
    """The header fields in order; a line that is no field joins the one before it."""
    fields: list[_Field] = []
    for line in head.splitlines(keepends=True):
        match = _FIELD_NAME.match(line)
        if match is None and fields:
            fields[-1] = _Field(fields[-1].name, fields[-1].lines + line)
            continue
        name = match.group(1).decode("ascii").lower() if match else ""
        fields.append(_Field(name, line))
    return fields


def _addresses(fields: list[_Field], name: str) -> list[str]:
    return [a.email for f in fields if f.name == name for a in parse_address_list(f.value)]


def _token(text: str) -> str:
    """``text`` safe inside a trace field: printable ASCII without spaces or brackets."""
    cleaned = "".join(ch for ch in text if "!" <= ch <= "~" and ch not in "()[];")
    return cleaned[:200] or "unknown"
