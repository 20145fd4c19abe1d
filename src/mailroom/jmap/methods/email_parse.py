"""``Email/parse`` (RFC 8621 §4.9): blobs read as Emails, without storing them.

Every argument is supported: ``blobIds``, ``properties`` (RFC 8621's default
list), ``bodyProperties``, ``fetchTextBodyValues``, ``fetchHTMLBodyValues``,
``fetchAllBodyValues`` and ``maxBodyValueBytes``, with the same meaning as in
``Email/get``. A parsed Email has no ``id``, ``threadId``, ``mailboxIds``,
``keywords`` or ``receivedAt`` (all null, RFC 8621 §4.9); ``blobId`` is the
blob parsed and ``size`` its length.

The convenience properties are the RFC 8621 §4.1 header forms of the raw
bytes (``messageId`` is ``header:Message-ID:asMessageIds``, ``from``
``header:From:asAddresses``, ``sentAt`` ``header:Date:asDate``, ...);
``preview`` and ``hasAttachment`` come from the same MIME parse as stored
mail. Body parts get blob ids that download: a raw message's are its
``A<id>-<part>``; an upload's ``B<sha256>-<part>``; any other blob (a
``message/rfc822`` attachment, say) is kept as an upload of the user for the
upload lifetime, so its parts get such ids too.

A blob the user cannot read is in ``notFound``; bytes with no header field
at all (not a message) are in ``notParsable``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from mailroom.jmap import ids
from mailroom.jmap.blobs import blob_data, find_blob
from mailroom.jmap.bodies import BODY_PROPERTIES, DEFAULT_BODY_PROPERTIES, parse_structure
from mailroom.jmap.dispatcher import Context
from mailroom.jmap.header_forms import header_property, raw_fields
from mailroom.jmap.methods.blob import blob_id_list
from mailroom.jmap.methods.common import boolean, requested_properties, unsigned
from mailroom.jmap.methods.email_reader import DEFAULT_PROPERTIES, PROPERTIES, BodyRequest
from mailroom.jmap.uploads import own_upload, store_blob
from mailroom.mime import parse_message
from mailroom.store.models.base import utcnow

# What only a stored Email has (RFC 8621 §4.9: null for a parsed one).
_STORED_ONLY = frozenset({"id", "threadId", "mailboxIds", "keywords", "receivedAt"})
# RFC 8621 §4.9: Email/get's default properties without those of a stored Email.
DEFAULT_PARSE_PROPERTIES = tuple(
    name for name in DEFAULT_PROPERTIES if name not in {*_STORED_ONLY, "blobId", "size"}
)
# The convenience properties as the header forms RFC 8621 §4.1.2-4.1.3 defines them.
_HEADER_FORMS = {
    "messageId": "header:Message-ID:asMessageIds",
    "inReplyTo": "header:In-Reply-To:asMessageIds",
    "references": "header:References:asMessageIds",
    "sender": "header:Sender:asAddresses",
    "from": "header:From:asAddresses",
    "to": "header:To:asAddresses",
    "cc": "header:Cc:asAddresses",
    "bcc": "header:Bcc:asAddresses",
    "replyTo": "header:Reply-To:asAddresses",
    "subject": "header:Subject:asText",
    "sentAt": "header:Date:asDate",
}
_UPLOAD_MEDIA_TYPE = "message/rfc822"
# parse_structure names parts A<this>-<part>; rewritten for uploads below.
_PLACEHOLDER = 0


def _rename_parts(value: Any, prefix: str, replacement: str) -> Any:
    """``value`` with every part ``blobId`` starting with ``prefix`` renamed."""
    if isinstance(value, list):
        return [_rename_parts(item, prefix, replacement) for item in value]
    if isinstance(value, dict):
        renamed = {key: _rename_parts(item, prefix, replacement) for key, item in value.items()}
        blob_id = renamed.get("blobId")
        if isinstance(blob_id, str) and blob_id.startswith(prefix):
            renamed["blobId"] = replacement + blob_id[len(prefix) :]
        return renamed
    return value


class EmailParser:
    """Parses the blobs of one Email/parse call into Email objects."""

    def __init__(
        self,
        session: Session,
        user_id: int,
        properties: Sequence[str],
        body: BodyRequest,
    ) -> None:
        self.session = session
        self.user_id = user_id
        self.properties = properties
        self.body = body

    def _source(self, blob_id: str, data: bytes) -> tuple[int, str | None]:
        """(message id for part names, upload digest to rename them to) for this blob."""
        parsed = ids.parse_blob(blob_id)
        if parsed is not None and parsed[1] is None:
            return parsed[0], None  # a raw message: its parts are A<id>-<part>
        sha256 = ids.parse_upload_blob(blob_id)
        if sha256 is None:  # keep the bytes so that their parts can be downloaded
            sha256 = store_blob(self.session, data, self.user_id)
            own_upload(self.session, self.user_id, sha256, len(data), _UPLOAD_MEDIA_TYPE, utcnow())
        return _PLACEHOLDER, sha256

    def parse(self, blob_id: str, data: bytes) -> dict[str, Any] | None:
        """The Email of ``blob_id``'s bytes ``data``, or None when they are not a message."""
        message = parse_message(data)
        if not data.strip() or not message.headers:
            return None
        message_id, sha256 = self._source(blob_id, data)
        structure = parse_structure(message_id, data)
        fields = raw_fields(structure.root.msg)
        email: dict[str, Any] = {}
        for name in self.properties:
            if name in _STORED_ONLY:
                email[name] = None
            elif name == "blobId":
                email[name] = blob_id
            elif name == "size":
                email[name] = len(data)
            elif name == "hasAttachment":
                email[name] = bool(message.attachments)
            elif name == "preview":
                email[name] = message.preview[:256]
            elif name == "headers":
                email[name] = [{"name": k, "value": v} for k, v in fields]
            elif name in _HEADER_FORMS or name.startswith("header:"):
                email[name] = header_property(_HEADER_FORMS.get(name, name)).pick(fields)
            else:
                email[name] = self.body.value(structure, name)
        if sha256 is not None:
            email = _rename_parts(email, f"A{_PLACEHOLDER}-", f"B{sha256}-")
        return email


def email_parse(context: Context, session: Session, args: dict[str, Any]) -> dict[str, Any]:
    """Email/parse: each readable blob as an Email object, nothing stored."""
    user_id = context.check_account(args)
    blob_ids = blob_id_list(
        args.get("blobIds"), context.limits.max_objects_in_get, "maxObjectsInGet"
    )
    properties = requested_properties(args, PROPERTIES, DEFAULT_PARSE_PROPERTIES)
    if "id" not in (args.get("properties") or ()):
        properties.remove("id")  # only when asked for: a parsed Email has no id
    body_properties = requested_properties(
        args, BODY_PROPERTIES, DEFAULT_BODY_PROPERTIES, key="bodyProperties"
    )
    for name in [*properties, *body_properties]:
        if name.startswith("header:"):
            header_property(name)  # invalidArguments for a bad name or a form not allowed
    body = BodyRequest(
        None if args.get("bodyProperties") is None else body_properties,
        boolean(args, "fetchTextBodyValues"),
        boolean(args, "fetchHTMLBodyValues"),
        boolean(args, "fetchAllBodyValues"),
        unsigned(args, "maxBodyValueBytes", 0),
    )
    parser = EmailParser(session, user_id, properties, body)
    parsed: dict[str, Any] = {}
    not_parsable: list[str] = []
    not_found: list[str] = []
    for blob_id in blob_ids:
        found = find_blob(session, user_id, blob_id)
        data = blob_data(session, found) if found is not None else None
        if data is None:
            not_found.append(blob_id)
            continue
        email = parser.parse(blob_id, data)
        if email is None:
            not_parsable.append(blob_id)
        else:
            parsed[blob_id] = email
    return {
        "accountId": context.account_id,
        "parsed": parsed or None,
        "notParsable": not_parsable or None,
        "notFound": not_found or None,
    }
