"""The Email object a client sends to create an email (RFC 8621 §4.6), checked and translated.

:func:`read_email_form` turns the JSON object of one ``Email/set`` creation into
an :class:`EmailForm`: top-level :class:`~mailroom.mime.compose.Header` values,
one :class:`~mailroom.mime.compose.BodyPart` tree, and the store-side
properties (``mailboxIds``, ``keywords``, ``receivedAt``). Every RFC 8621 §4.6
restriction is enforced and reported as a SetError (:class:`FormError`):

* ``invalidProperties`` (with ``properties``) for: a server-set property
  (``id``, ``blobId``, ``threadId``, ``size``, ``hasAttachment``, ``preview``);
  an unknown property; ``headers`` on the email or a part; one header field
  given twice (``from`` and ``header:From``, or two ``header:`` forms); a form
  §4.1.2 forbids for that field (``header:From:asDate``); a ``Content-*``
  header at the top level; ``bodyStructure`` together with ``textBody``,
  ``htmlBody`` or ``attachments``; a part header that a part property
  already represents (``type``, ``disposition``, ``cid``, ``language``,
  ``location``) and ``Content-Transfer-Encoding`` anywhere; ``textBody`` or
  ``htmlBody`` that is not exactly one ``text/plain`` / ``text/html`` part;
  a part with both or neither of ``partId`` and ``blobId``, a ``partId`` part
  with ``charset`` or ``size`` or not naming a ``bodyValues`` entry; a body
  value with ``isEncodingProblem`` or ``isTruncated`` true; a bad value of
  any property;
* ``blobNotFound`` with ``notFound``: every ``blobId`` of a part the user
  cannot read (``jmap.blobs.read_blob``: uploads, ``R<id>``, ``A<id>-<part>``);
* ``tooLarge``: the attachments (blob parts) add up to more than
  :data:`MAX_SIZE_ATTACHMENTS_PER_EMAIL` octets (the session's
  ``maxSizeAttachmentsPerEmail``).

The ``textBody``/``htmlBody``/``attachments`` form becomes the usual
structure: ``multipart/alternative`` when there are both bodies; inline
attachments (disposition ``inline``, or a ``cid`` without a disposition) in a
``multipart/related`` with the HTML body (else the text body); every other
attachment under a ``multipart/mixed`` root.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mailroom.jmap.bodies import DEFAULT_STRUCTURE_PROPERTIES
from mailroom.jmap.errors import MethodError, Refused, set_error
from mailroom.jmap.header_forms import form_allowed
from mailroom.jmap.methods.common import parse_utc_date
from mailroom.labels.keywords import parse_keyword
from mailroom.mime.compose import BodyPart, Header, HeaderForm, Mailbox, MailboxGroup

__all__ = [
    "MAX_SIZE_ATTACHMENTS_PER_EMAIL",
    "BlobReader",
    "EmailForm",
    "FormError",
    "read_email_form",
]

# The sum of the decoded sizes of the blob parts of one created email (RFC 8621 §1.3.1).
MAX_SIZE_ATTACHMENTS_PER_EMAIL = 25_000_000

# The bytes and media type of a blob id the user may read, or None.
BlobReader = Callable[[str], tuple[bytes, str] | None]

SERVER_SET = frozenset({"id", "blobId", "threadId", "size", "hasAttachment", "preview"})
# Convenience property -> (header field, form) (RFC 8621 §4.1.2 and §4.1.3).
CONVENIENCE: dict[str, tuple[str, HeaderForm]] = {
    "messageId": ("Message-ID", "messageIds"),
    "inReplyTo": ("In-Reply-To", "messageIds"),
    "references": ("References", "messageIds"),
    "sender": ("Sender", "addresses"),
    "from": ("From", "addresses"),
    "to": ("To", "addresses"),
    "cc": ("Cc", "addresses"),
    "bcc": ("Bcc", "addresses"),
    "replyTo": ("Reply-To", "addresses"),
    "subject": ("Subject", "text"),
    "sentAt": ("Date", "date"),
}
EMAIL_PROPERTIES = frozenset(
    {
        *CONVENIENCE,
        "mailboxIds",
        "keywords",
        "receivedAt",
        "bodyStructure",
        "bodyValues",
        "textBody",
        "htmlBody",
        "attachments",
    }
)
PART_PROPERTIES = frozenset(DEFAULT_STRUCTURE_PROPERTIES)
# Part headers that a part property represents (giving both is two of one field).
PART_HEADER_PROPERTY = {
    "content-type": "type",
    "content-disposition": "disposition",
    "content-id": "cid",
    "content-language": "language",
    "content-location": "location",
}
_FORMS = {
    "asRaw": "raw",
    "asText": "text",
    "asAddresses": "addresses",
    "asGroupedAddresses": "groupedAddresses",
    "asMessageIds": "messageIds",
    "asDate": "date",
    "asURLs": "urls",
}
_FIELD_NAME = re.compile(r"[!-9;-~]+")  # RFC 5322 §2.2: printable ASCII but ":"
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9a-z]+")  # RFC 2045 §5.1 token (lower-cased)


class FormError(Refused):
    """The creation is refused; ``error`` is its SetError."""


def _invalid(prop: str, description: str) -> FormError:
    return FormError(set_error("invalidProperties", description, [prop]))


@dataclass
class EmailForm:
    """A checked creation: what to compose and where to keep it."""

    headers: list[Header]
    body: BodyPart
    mailbox_ids: list[str]
    keywords: set[str]
    received_at: datetime | None
    attachment_size: int = 0


# -- header properties ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HeaderProperty:
    """A parsed ``header:Name[:asForm][:all]`` property name."""

    name: str
    form: HeaderForm
    every: bool

    @property
    def key(self) -> str:
        """The field, case-folded: two properties with one key are one header field twice."""
        return self.name.lower()


def header_property(prop: str) -> HeaderProperty:
    """Parse a ``header:`` property name; invalidProperties if malformed or forbidden."""
    parts = prop.split(":")
    name, rest = (parts[1], parts[2:]) if len(parts) > 1 else ("", [])
    every = bool(rest) and rest[-1] == "all"
    if every:
        rest = rest[:-1]
    form_name = rest[0] if rest else "asRaw"
    if not _FIELD_NAME.fullmatch(name) or len(rest) > 1 or form_name not in _FORMS:
        raise _invalid(prop, f"{prop} is not a header property (header:Name[:asForm][:all]).")
    form: HeaderForm = _FORMS[form_name]  # type: ignore[assignment]
    key = name.lower()
    if not form_allowed(key, form_name):
        raise _invalid(prop, f"The {form_name} form is not defined for the {name} header field.")
    return HeaderProperty(name, form, every)


def _string(value: object, prop: str) -> str:
    if not isinstance(value, str):
        raise _invalid(prop, f"{prop} must be a string.")
    return value


def _strings(value: object, prop: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _invalid(prop, f"{prop} must be a list of strings.")
    return tuple(value)


def _mailbox(value: object, prop: str) -> Mailbox:
    if not isinstance(value, dict) or set(value) - {"name", "email"}:
        raise _invalid(prop, f"{prop} must hold EmailAddress objects (name, email).")
    name, email = value.get("name"), value.get("email")
    if not isinstance(email, str) or not (name is None or isinstance(name, str)):
        raise _invalid(prop, f"{prop}: an EmailAddress needs an email string and a name or null.")
    return Mailbox(name, email)


def _mailboxes(value: object, prop: str) -> tuple[Mailbox, ...]:
    if not isinstance(value, list):
        raise _invalid(prop, f"{prop} must be a list of EmailAddress objects.")
    return tuple(_mailbox(v, prop) for v in value)


def _groups(value: object, prop: str) -> tuple[MailboxGroup, ...]:
    if not isinstance(value, list):
        raise _invalid(prop, f"{prop} must be a list of EmailAddressGroup objects.")
    groups: list[MailboxGroup] = []
    for item in value:
        if not isinstance(item, dict) or set(item) - {"name", "addresses"}:
            raise _invalid(prop, f"{prop} must hold EmailAddressGroup objects (name, addresses).")
        name = item.get("name")
        if not (name is None or isinstance(name, str)):
            raise _invalid(prop, f"{prop}: a group name must be a string or null.")
        groups.append(MailboxGroup(name, _mailboxes(item.get("addresses"), prop)))
    return tuple(groups)


def _date(value: object, prop: str) -> datetime:
    """A Date (RFC 3339 with its offset, which is kept)."""
    text = _string(value, prop).strip()
    try:
        parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "Zz" else text)
    except ValueError:
        raise _invalid(prop, f"{prop} is not a date like 2024-03-01T09:00:00+01:00.") from None
    if parsed.tzinfo is None:
        raise _invalid(prop, f"{prop} needs a time zone offset.")
    return parsed.replace(microsecond=0)


def _message_ids(value: object, prop: str) -> tuple[str, ...]:
    items = _strings(value, prop)
    for item in items:
        if not item or "<" in item or ">" in item or any(ch.isspace() for ch in item):
            raise _invalid(prop, f"{prop}: {item!r} is not a message id (no <>, no spaces).")
    return items


def _one_value(form: HeaderForm, value: object, prop: str) -> Any:
    if form in ("raw", "text"):
        return _string(value, prop)
    if form == "addresses":
        return _mailboxes(value, prop)
    if form == "groupedAddresses":
        return _groups(value, prop)
    if form == "messageIds":
        return _message_ids(value, prop)
    if form == "date":
        return _date(value, prop)
    return _strings(value, prop)


def header_values(
    name: str, form: HeaderForm, every: bool, value: object, prop: str
) -> list[Header]:
    """The header instances a property value stands for (none for null or an empty :all)."""
    if value is None:
        return []
    if every:
        if not isinstance(value, list):
            raise _invalid(prop, f"{prop} (:all) must be a list of values.")
        return [Header(name, form, _one_value(form, v, prop)) for v in value if v is not None]
    return [Header(name, form, _one_value(form, value, prop))]


class _Fields:
    """The header fields named so far in one object: each field at most once."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[str, str]] = {}

    def claim(self, key: str, prop: str, reported: str | None = None) -> None:
        """Note that ``prop`` sets the field ``key``; ``reported``: the Email property to name."""
        first, first_reported = self.seen.setdefault(key, (prop, reported or prop))
        if first != prop:
            raise FormError(
                set_error(
                    "invalidProperties",
                    f"{first} and {prop} are the same header field; give it once.",
                    list(dict.fromkeys([first_reported, reported or prop])),
                )
            )


# -- body parts ------------------------------------------------------------------------


@dataclass
class _Body:
    """Reading the body parts of one creation: its values, its blobs, what was missing."""

    values: dict[str, str]
    read_blob: BlobReader
    missing: list[str] = field(default_factory=list)
    attachment_size: int = 0
    used_values: set[str] = field(default_factory=set)

    def part(
        self, obj: object, prop: str, *, default_type: str, top: _Fields | None = None
    ) -> BodyPart:
        """One EmailBodyPart (``top``: the fields of the Email, when this is the root part)."""
        if not isinstance(obj, dict):
            raise _invalid(prop, f"{prop} must hold EmailBodyPart objects.")
        fields = top or _Fields()
        headers: list[Header] = []
        for key, value in obj.items():
            if key == "headers":
                raise _invalid(prop, "headers cannot be given; set each header:Name property.")
            if key.startswith("header:"):
                try:
                    spec = header_property(key)
                except FormError as exc:  # named by the Email property that holds the part
                    raise _invalid(prop, exc.error["description"]) from None
                if spec.key == "content-transfer-encoding":
                    raise _invalid(prop, "Content-Transfer-Encoding is the server's to choose.")
                if spec.key in PART_HEADER_PROPERTY:
                    raise _invalid(
                        prop,
                        f"{key} is given by the part property {PART_HEADER_PROPERTY[spec.key]}.",
                    )
                fields.claim(spec.key, key, prop)
                headers.extend(header_values(spec.name, spec.form, spec.every, value, prop))
            elif key not in PART_PROPERTIES:
                raise _invalid(prop, f"{key} is not an EmailBodyPart property.")
        if obj.get("partId") is not None:
            default_type = "text/plain"  # a body value is text
        media_type = self._type(obj.get("type"), prop, default_type)
        common = {
            "disposition": _optional_string(obj, "disposition", prop),
            "name": _optional_string(obj, "name", prop),
            "cid": _optional_string(obj, "cid", prop),
            "language": _optional_strings(obj, "language", prop),
            "location": _optional_string(obj, "location", prop),
            "headers": tuple(headers),
        }
        if media_type.startswith("multipart/"):
            if any(obj.get(k) is not None for k in ("partId", "blobId", "charset", "size")):
                raise _invalid(prop, "A multipart part has subParts, not partId/blobId/charset.")
            children = obj.get("subParts")
            if not isinstance(children, list) or not children:
                raise _invalid(prop, f"{media_type} needs a non-empty subParts list.")
            parts = tuple(self.part(c, prop, default_type="text/plain") for c in children)
            return BodyPart(media_type, parts=parts, **common)  # type: ignore[arg-type]
        if obj.get("subParts") is not None:
            raise _invalid(prop, "Only a multipart/* part has subParts.")
        part_id, blob_id = obj.get("partId"), obj.get("blobId")
        if (part_id is None) == (blob_id is None):
            raise _invalid(prop, "A body part needs exactly one of partId and blobId.")
        if part_id is not None:
            return self._value_part(obj, part_id, media_type, prop, common)
        return self._blob_part(obj, blob_id, media_type, prop, common)

    def _type(self, value: object, prop: str, default: str) -> str:
        if value is None:
            return default
        text = _string(value, prop).strip().lower()
        main, slash, sub = text.partition("/")
        if not slash or not _TOKEN.fullmatch(main) or not _TOKEN.fullmatch(sub):
            raise _invalid(prop, f"{value!r} is not a media type (type/subtype).")
        return text

    def _value_part(
        self, obj: dict[str, Any], part_id: object, media_type: str, prop: str, common: Any
    ) -> BodyPart:
        if obj.get("charset") is not None or obj.get("size") is not None:
            raise _invalid(prop, "A part with a partId takes neither charset nor size.")
        if not isinstance(part_id, str) or part_id not in self.values:
            raise _invalid(prop, f"partId {part_id!r} names no entry of bodyValues.")
        if not media_type.startswith("text/"):
            raise _invalid(prop, "A part whose content is a body value must be text/*.")
        self.used_values.add(part_id)
        return BodyPart(media_type, content=self.values[part_id], **common)

    def _blob_part(
        self, obj: dict[str, Any], blob_id: object, media_type: str | None, prop: str, common: Any
    ) -> BodyPart:
        if not isinstance(blob_id, str):
            raise _invalid(prop, "blobId must be a string.")
        charset = _optional_string(obj, "charset", prop)
        size = obj.get("size")
        if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
            raise _invalid(prop, "size must be an unsigned integer (it is ignored).")
        found = self.read_blob(blob_id)
        if found is None:
            self.missing.append(blob_id)
            return BodyPart("application/octet-stream")
        data, blob_type = found
        self.attachment_size += len(data)
        given = obj.get("type") is not None
        chosen = media_type if given else blob_type.partition(";")[0].strip().lower()
        return BodyPart(
            chosen or "application/octet-stream", content=data, charset=charset, **common
        )


def _optional_string(obj: dict[str, Any], key: str, prop: str) -> str | None:
    """A part's string property or None; the error names the Email property holding the part."""
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise _invalid(prop, f"{key} of a part in {prop} must be a string.")
    return value


def _optional_strings(obj: dict[str, Any], key: str, prop: str) -> tuple[str, ...]:
    value = obj.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _invalid(prop, f"{key} of a part in {prop} must be a list of strings.")
    return tuple(value)


def _body_values(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _invalid("bodyValues", "bodyValues must map partIds to EmailBodyValue objects.")
    values: dict[str, str] = {}
    for part_id, body in value.items():
        if not isinstance(body, dict) or set(body) - {"value", "isEncodingProblem", "isTruncated"}:
            raise _invalid("bodyValues", f"bodyValues/{part_id} must be an EmailBodyValue.")
        if not isinstance(body.get("value"), str):
            raise _invalid("bodyValues", f"bodyValues/{part_id} needs a value string.")
        for flag in ("isEncodingProblem", "isTruncated"):
            if body.get(flag) not in (None, False):
                raise _invalid("bodyValues", f"bodyValues/{part_id}: {flag} must be false.")
        values[part_id] = body["value"]
    return values


def _structure(obj: dict[str, Any], body: _Body, fields: _Fields) -> BodyPart:
    """The root part from ``bodyStructure`` or from textBody/htmlBody/attachments."""
    given = [k for k in ("textBody", "htmlBody", "attachments") if obj.get(k) is not None]
    if obj.get("bodyStructure") is not None:
        if given:
            raise FormError(
                set_error(
                    "invalidProperties",
                    "bodyStructure cannot be given with textBody, htmlBody or attachments.",
                    ["bodyStructure", *given],
                )
            )
        return body.part(
            obj["bodyStructure"], "bodyStructure", default_type="text/plain", top=fields
        )
    text = _single(obj, "textBody", "text/plain", body)
    html = _single(obj, "htmlBody", "text/html", body)
    attachments_value = obj.get("attachments") or []
    if not isinstance(attachments_value, list):
        raise _invalid("attachments", "attachments must be a list of EmailBodyPart objects.")
    attachments = [
        body.part(a, "attachments", default_type="application/octet-stream")
        for a in attachments_value
    ]
    inline = [a for a in attachments if _is_inline(a)]
    others = [_as_attachment(a) for a in attachments if not _is_inline(a)]
    main: BodyPart | None = None
    if html is not None:
        main = BodyPart("multipart/related", parts=(html, *inline)) if inline else html
        if text is not None:
            main = BodyPart("multipart/alternative", parts=(text, main))
    elif text is not None:
        main = BodyPart("multipart/related", parts=(text, *inline)) if inline else text
    else:
        others = [*inline, *others]
    if not others:
        return main or BodyPart("text/plain", content="")
    return BodyPart("multipart/mixed", parts=(*([main] if main else []), *others))


def _single(obj: dict[str, Any], prop: str, media_type: str, body: _Body) -> BodyPart | None:
    value = obj.get(prop)
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 1:
        raise _invalid(prop, f"{prop} must hold exactly one {media_type} part.")
    part = body.part(value[0], prop, default_type=media_type)
    if part.media_type != media_type:
        raise _invalid(prop, f"The {prop} part must be of type {media_type}.")
    return part


def _is_inline(part: BodyPart) -> bool:
    disposition = (part.disposition or "").lower()
    return disposition == "inline" or (not disposition and part.cid is not None)


def _as_attachment(part: BodyPart) -> BodyPart:
    if part.disposition is not None or part.is_multipart:
        return part
    return BodyPart(
        part.media_type,
        content=part.content,
        charset=part.charset,
        disposition="attachment",
        name=part.name,
        cid=part.cid,
        language=part.language,
        location=part.location,
        headers=part.headers,
    )


# -- the whole object ------------------------------------------------------------------


def _mailbox_ids(value: object) -> list[str]:
    """The mailbox ids as given (``#`` creation references are the store side's to resolve)."""
    if not isinstance(value, dict) or not value or not all(v is True for v in value.values()):
        raise _invalid("mailboxIds", "mailboxIds must map at least one mailbox id to true.")
    return [str(key) for key in value]


def _keywords(value: object) -> set[str]:
    if value is None:
        return set()
    if not isinstance(value, dict) or not all(v is True for v in value.values()):
        raise _invalid("keywords", "keywords must map keywords to true.")
    keywords = {parse_keyword(k) for k in value}
    if None in keywords:
        raise _invalid("keywords", "A keyword is 1-255 characters of IMAP atom text.")
    return {k for k in keywords if k is not None}


def _received_at(value: object) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_utc_date(value, "receivedAt")
    except MethodError:
        raise _invalid("receivedAt", "receivedAt must be a UTCDate.") from None


def read_email_form(obj: object, read_blob: BlobReader) -> EmailForm:
    """Check one creation's Email object; :class:`FormError` with its SetError if refused."""
    if not isinstance(obj, dict):
        raise FormError(set_error("invalidProperties", "An Email to create must be an object."))
    server_set = sorted(k for k in obj if k in SERVER_SET)
    if server_set:
        raise _invalid(server_set[0], f"{server_set[0]} is set by the server.")
    fields = _Fields()
    headers: list[Header] = []
    for key, value in obj.items():
        if key == "headers":
            raise _invalid("headers", "headers cannot be given; set each header:Name property.")
        if key.startswith("header:"):
            spec = header_property(key)
            if spec.key.startswith("content-"):
                raise _invalid(key, "Content-* header fields belong to body parts.")
            fields.claim(spec.key, key)
            headers.extend(header_values(spec.name, spec.form, spec.every, value, key))
        elif key in CONVENIENCE:
            name, form = CONVENIENCE[key]
            fields.claim(name.lower(), key)
            headers.extend(header_values(name, form, False, value, key))
        elif key not in EMAIL_PROPERTIES:
            raise _invalid(key, f"{key} is not an Email property.")
    mailbox_ids = _mailbox_ids(obj.get("mailboxIds"))
    keywords = _keywords(obj.get("keywords"))
    received_at = _received_at(obj.get("receivedAt"))
    body = _Body(_body_values(obj.get("bodyValues")), read_blob)
    root = _structure(obj, body, fields)
    if body.missing:
        error = set_error("blobNotFound", "Some blobIds of the body parts do not exist.")
        error["notFound"] = list(dict.fromkeys(body.missing))
        raise FormError(error)
    if body.attachment_size > MAX_SIZE_ATTACHMENTS_PER_EMAIL:
        raise FormError(
            set_error(
                "tooLarge",
                f"The attachments add up to {body.attachment_size} octets; at most "
                f"maxSizeAttachmentsPerEmail ({MAX_SIZE_ATTACHMENTS_PER_EMAIL}) are allowed.",
            )
        )
    return EmailForm(headers, root, mailbox_ids, keywords, received_at, body.attachment_size)
