"""What the compose form holds, read from its fields and written as a JMAP Email object.

A :class:`Composition` is the state of one compose window: the draft it
replaces (``draft``: an email id, None before the first save), the identity
it is sent as, the recipients as typed, subject, text, the threading ids of a
reply and the attachments (JMAP blob ids: a fresh upload ``B…``, or a part
of the stored draft or forwarded message ``A…``). :meth:`Composition.email`
is the ``Email/set`` creation of the draft, so the web page stores drafts
exactly as a JMAP client does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from mailroom.jmap import ids
from mailroom.mime.addresses import Address, parse_address_list
from mailroom.mime.msgids import parse_id_list
from mailroom.store.models import Identity

__all__ = ["Attached", "Composition", "address_text", "addresses_text"]

DRAFT_KEYWORDS = {"$draft": True, "$seen": True}
_SPECIALS = frozenset('()<>[]:;@\\,."')


@dataclass(frozen=True, slots=True)
class Attached:
    """One attachment of the composition: its blob, file name, media type and size."""

    blob_id: str
    name: str
    type: str
    size: int

    def token(self) -> str:
        """The value of its hidden form field (read back by :meth:`parse`)."""
        return f"{self.blob_id}|{self.type}|{self.size}|{self.name}"

    @classmethod
    def parse(cls, value: str) -> Attached | None:
        """The attachment a hidden field names, or None for a malformed one."""
        parts = value.split("|", 3)
        if len(parts) != 4 or not parts[0] or not parts[2].isdigit():
            return None
        return cls(
            parts[0],
            parts[3] or "attachment",
            parts[1] or "application/octet-stream",
            int(parts[2]),
        )


def address_text(address: Address) -> str:
    """One address as a person types it: ``Name <a@b>``, the name quoted when it must be."""
    if not address.name:
        return address.email
    name = address.name
    if any(char in _SPECIALS for char in name):
        name = '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"{name} <{address.email}>"


def addresses_text(addresses: Sequence[Address]) -> str:
    """Addresses as the text of a To/Cc/Bcc field."""
    return ", ".join(address_text(address) for address in addresses)


@dataclass(frozen=True)
class Composition:
    """One compose window's content (module docstring)."""

    draft: int | None = None
    identity: int | None = None
    to: str = ""
    cc: str = ""
    bcc: str = ""
    subject: str = ""
    body: str = ""
    in_reply_to: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    attachments: tuple[Attached, ...] = field(default_factory=tuple)

    @classmethod
    def from_fields(cls, fields: Mapping[str, str], attachments: Sequence[str]) -> Composition:
        """The composition the form's fields describe (unknown or malformed ones ignored)."""
        draft = fields.get("draft", "")
        identity = fields.get("identity", "")
        found = [Attached.parse(value) for value in attachments]
        return cls(
            draft=int(draft) if draft.isdigit() else None,
            identity=int(identity) if identity.isdigit() else None,
            to=fields.get("to", "").strip(),
            cc=fields.get("cc", "").strip(),
            bcc=fields.get("bcc", "").strip(),
            subject=fields.get("subject", "").strip(),
            body=fields.get("body", "").replace("\r\n", "\n"),
            in_reply_to=tuple(parse_id_list(fields.get("in_reply_to"))),
            references=tuple(parse_id_list(fields.get("references"))),
            attachments=tuple(item for item in found if item is not None),
        )

    def with_attachments(self, attachments: Sequence[Attached]) -> Composition:
        """The same composition with other attachments."""
        return replace(self, attachments=tuple(attachments))

    def recipients(self) -> dict[str, list[Address]]:
        """To, Cc and Bcc as parsed addresses."""
        return {
            "to": parse_address_list(self.to),
            "cc": parse_address_list(self.cc),
            "bcc": parse_address_list(self.bcc),
        }

    def email(self, identity: Identity, drafts_label: int) -> dict[str, Any]:
        """The ``Email/set`` creation of this draft, From the identity, in Drafts."""
        obj: dict[str, Any] = {
            "mailboxIds": {ids.mailbox_id(drafts_label): True},
            "keywords": dict(DRAFT_KEYWORDS),
            "from": [{"name": identity.name or None, "email": identity.email}],
            "subject": self.subject,
            "bodyValues": {"text": {"value": self.body}},
            "textBody": [{"partId": "text", "type": "text/plain"}],
        }
        for name, addresses in self.recipients().items():
            if addresses:
                obj[name] = [{"name": a.name or None, "email": a.email} for a in addresses]
        if self.in_reply_to:
            obj["inReplyTo"] = list(self.in_reply_to)
        if self.references:
            obj["references"] = list(self.references)
        if self.attachments:
            obj["attachments"] = [
                {"blobId": a.blob_id, "type": a.type, "name": a.name, "disposition": "attachment"}
                for a in self.attachments
            ]
        return obj
