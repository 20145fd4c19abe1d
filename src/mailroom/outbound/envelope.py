"""The SMTP envelope of an outgoing message, and the header section it is read from.

An envelope has the shape of RFC 8621 section 7 (``Envelope``)::

    {"mailFrom": {"email": "a@example.org", "parameters": None},
     "rcptTo": [{"email": "b@example.net", "parameters": None}, ...]}

When the sender gives none, :func:`envelope_from_headers` derives it as RFC
8621 section 7.5 says: ``mailFrom`` is the Sender address, or else the first
From address; ``rcptTo`` is every address of To, Cc and Bcc, once each
(compared case-insensitively). A message that was resent (RFC 5322 section
3.6.6) goes to the recipients of its newest ``Resent-*`` block instead, from
that block's Resent-Sender or Resent-From.

Bcc is an envelope matter only: :func:`strip_bcc` removes ``Bcc`` and
``Resent-Bcc`` from the bytes that are transmitted, leaving every other byte as
it was (headers are split, never re-generated).
"""

from __future__ import annotations

from typing import Any, TypedDict

from mailroom.errors import MailroomError
from mailroom.mime.addresses import parse_address_list
from mailroom.mime.msgids import normalize_message_id

__all__ = [
    "Envelope",
    "EnvelopeAddress",
    "OutboundError",
    "check_envelope",
    "envelope_from_headers",
    "header_fields",
    "message_id_of",
    "strip_bcc",
]

_HIDDEN = frozenset({"bcc", "resent-bcc"})


class OutboundError(MailroomError):
    """A message cannot be sent as given; one plain sentence (JMAP maps it to a SetError)."""


class EnvelopeAddress(TypedDict):
    """One address of an envelope with its SMTP parameters (None: none)."""

    email: str
    parameters: dict[str, Any] | None


class Envelope(TypedDict):
    """The SMTP envelope: MAIL FROM and the RCPT TO addresses (RFC 8621 section 7)."""

    mailFrom: EnvelopeAddress
    rcptTo: list[EnvelopeAddress]


def _split(raw: bytes) -> tuple[list[bytes], bytes]:
    """The header fields (each with its folded lines and line ends) and the rest of ``raw``."""
    fields: list[bytes] = []
    offset = 0
    for line in raw.splitlines(keepends=True):
        if line in (b"\r\n", b"\n"):
            break
        if line[:1] in (b" ", b"\t") and fields:
            fields[-1] += line
        else:
            fields.append(line)
        offset += len(line)
    return fields, raw[offset:]


def _name(field: bytes) -> str:
    name, colon, _ = field.partition(b":")
    return name.strip().decode("ascii", "replace").lower() if colon else ""


def header_fields(raw: bytes) -> list[tuple[str, str]]:
    """``(lower-cased name, unfolded value)`` of each header field of ``raw``, in order."""
    found: list[tuple[str, str]] = []
    for field in _split(raw)[0]:
        name = _name(field)
        if name:
            value = field.partition(b":")[2].decode("utf-8", "replace")
            found.append((name, " ".join(value.split())))
    return found


def strip_bcc(raw: bytes) -> bytes:
    """``raw`` without its Bcc and Resent-Bcc fields; every other byte unchanged."""
    fields, rest = _split(raw)
    kept = [field for field in fields if _name(field) not in _HIDDEN]
    if len(kept) == len(fields):
        return raw
    return b"".join(kept) + rest


def message_id_of(raw: bytes) -> str:
    """The Message-ID of ``raw`` without angle brackets; OutboundError when it has none."""
    for name, value in header_fields(raw):
        if name == "message-id":
            message_id = normalize_message_id(value)
            if message_id:
                return message_id
    raise OutboundError("The message has no Message-ID header; add one and send it again.")


def _resent_block(fields: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The newest (topmost) block of Resent-* fields, without the prefix; [] if none."""
    block: list[tuple[str, str]] = []
    seen: set[str] = set()
    for name, value in fields:
        if not name.startswith("resent-"):
            if block:
                break
            continue
        short = name.removeprefix("resent-")
        if short in seen and short in ("date", "from", "sender", "message-id"):
            break  # the same field again: an older block starts
        seen.add(short)
        block.append((short, value))
    return block


def _address(email: str) -> EnvelopeAddress:
    return {"email": email, "parameters": None}


def envelope_from_headers(raw: bytes) -> Envelope:
    """The envelope RFC 8621 section 7.5 derives from the headers of ``raw`` (module docstring).

    Raises :class:`OutboundError` when there is no sender or no recipient.
    """
    fields = _resent_block(header_fields(raw)) or header_fields(raw)
    values: dict[str, list[str]] = {}
    for name, value in fields:
        values.setdefault(name, []).append(value)
    senders = [
        address.email
        for name in ("sender", "from")
        for value in values.get(name, [])
        for address in parse_address_list(value)
        if "@" in address.email
    ]
    if not senders:
        raise OutboundError("The message has no From address; add one and send it again.")
    recipients: dict[str, str] = {}
    for name in ("to", "cc", "bcc"):
        for value in values.get(name, []):
            for address in parse_address_list(value):
                if "@" in address.email:
                    recipients.setdefault(address.email.lower(), address.email)
    if not recipients:
        raise OutboundError(
            "The message has no recipient (no To, Cc or Bcc address); add one and send it again."
        )
    return {"mailFrom": _address(senders[0]), "rcptTo": [_address(e) for e in recipients.values()]}


def check_envelope(envelope: Any) -> Envelope:
    """A given envelope in the RFC 8621 shape, recipients once each; OutboundError otherwise."""
    if not isinstance(envelope, dict):
        raise OutboundError("The envelope must be an object with mailFrom and rcptTo.")
    mail_from = _checked(envelope.get("mailFrom"), "mailFrom", empty_ok=True)
    rcpt_to = envelope.get("rcptTo")
    if not isinstance(rcpt_to, list) or not rcpt_to:
        raise OutboundError("The envelope's rcptTo must list at least one recipient.")
    recipients: dict[str, EnvelopeAddress] = {}
    for item in rcpt_to:
        address = _checked(item, "rcptTo", empty_ok=False)
        recipients.setdefault(address["email"].lower(), address)
    return {"mailFrom": mail_from, "rcptTo": list(recipients.values())}


def _checked(item: Any, where: str, *, empty_ok: bool) -> EnvelopeAddress:
    """One envelope address: an email with ``@`` (MAIL FROM may be empty, RFC 5321 4.5.5)."""
    email = item.get("email") if isinstance(item, dict) else None
    parameters = item.get("parameters") if isinstance(item, dict) else None
    if (
        not isinstance(email, str)
        or any(c.isspace() or c in "<>" for c in email)
        or not ("@" in email or (empty_ok and email == ""))
    ):
        raise OutboundError(f"The envelope's {where} has an invalid email address: {email!r}.")
    if parameters is not None and not isinstance(parameters, dict):
        raise OutboundError(f"The envelope's {where} parameters must be an object or null.")
    return {"email": email, "parameters": parameters}
