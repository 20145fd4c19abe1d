"""The envelope of a JMAP submission: given or derived, its recipients, its release time.

RFC 8621 §7: an ``envelope`` the client gives must have the Envelope shape
(``mailFrom`` and ``rcptTo`` addresses, each with ``parameters``: an object of
ESMTP keywords to strings or null, or null), else ``invalidProperties``; an
empty ``rcptTo`` is ``noRecipients``. Without one it is derived from the
headers (:func:`mailroom.outbound.envelope.envelope_from_headers`: Sender or
From, then To, Cc and Bcc once each); an address in those recipient headers
that is no mailbox is reported rather than dropped.

Every recipient must be an RFC 5321 mailbox (a dot-atom or quoted local part,
UTF-8 allowed as SMTPUTF8 does, ``@``, a domain name or an address literal;
64 octets of local part, 254 in all), else ``invalidRecipients`` listing
them; more than the policy allows is ``tooManyRecipients``.

FUTURERELEASE (RFC 4865): ``HOLDFOR`` (seconds, 1 to 9 digits) or
``HOLDUNTIL`` (an RFC 3339 date-time) among the ``mailFrom`` parameters put
the release later, at most ``maxDelayedSend`` seconds ahead; both at once, a
malformed value or a hold beyond the limit is ``invalidProperties``
(``envelope``), a HOLDUNTIL in the past is now. Other parameters are kept in
the envelope and not passed on: the transports send the addresses only.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from mailroom.jmap.errors import Refused, set_error
from mailroom.mime.addresses import parse_address_list
from mailroom.outbound.envelope import (
    Envelope,
    OutboundError,
    check_envelope,
    envelope_from_headers,
    header_fields,
)

__all__ = [
    "derived_envelope",
    "given_envelope",
    "is_mailbox",
    "release_time",
    "check_recipients",
]

_ATOM = r"(?:[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]|[^\x00-\x7f])+"
_QUOTED = r'"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\[\x20-\x7e]|[^\x00-\x7f])*"'
_LABEL = r"(?:[A-Za-z0-9]|[^\x00-\x7f])(?:[A-Za-z0-9-]|[^\x00-\x7f])*"
_MAILBOX = re.compile(
    rf"(?P<local>{_ATOM}(?:\.{_ATOM})*|{_QUOTED})"
    rf"@(?:{_LABEL}(?:\.{_LABEL})*|\[[\x21-\x5a\x5e-\x7e]+\])"
)
_KEYWORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*")
_HOLDFOR = re.compile(r"[0-9]{1,9}")
_RECIPIENT_FIELDS = frozenset({"to", "cc", "bcc", "resent-to", "resent-cc", "resent-bcc"})
_SHAPE = (
    "The envelope is {mailFrom: Address, rcptTo: [Address]}, each Address "
    "{email: String, parameters: {keyword: String|null}|null}."
)


def _invalid_envelope(description: str = _SHAPE) -> Refused:
    return Refused(set_error("invalidProperties", description, ["envelope"]))


def is_mailbox(email: str) -> bool:
    """Whether ``email`` is an RFC 5321 Mailbox (with SMTPUTF8's UTF-8) one can send to."""
    match = _MAILBOX.fullmatch(email)
    if match is None or len(email.encode()) > 254:
        return False
    return len(match["local"].encode()) <= 64 and not any(
        label.startswith("-") or label.endswith("-") for label in email.rsplit("@", 1)[1].split(".")
    )


def _address_shape(value: object) -> bool:
    if not isinstance(value, dict) or not set(value) <= {"email", "parameters"}:
        return False
    parameters = value.get("parameters")
    return isinstance(value.get("email"), str) and (
        parameters is None
        or (
            isinstance(parameters, dict)
            and all(
                isinstance(key, str)
                and _KEYWORD.fullmatch(key)
                and (item is None or isinstance(item, str))
                for key, item in parameters.items()
            )
        )
    )


def given_envelope(value: object) -> Envelope:
    """A client's envelope, shape checked and recipients once each; Refused otherwise."""
    if not isinstance(value, dict) or set(value) != {"mailFrom", "rcptTo"}:
        raise _invalid_envelope()
    rcpt_to = value["rcptTo"]
    if not _address_shape(value["mailFrom"]) or not isinstance(rcpt_to, list):
        raise _invalid_envelope()
    if not all(_address_shape(item) for item in rcpt_to):
        raise _invalid_envelope()
    if not rcpt_to:
        raise Refused(set_error("noRecipients", "The envelope has no rcptTo address."))
    check_recipients([item["email"] for item in rcpt_to], None)
    try:
        return check_envelope(value)
    except OutboundError as error:  # mailFrom itself is no address
        raise _invalid_envelope(str(error)) from None


def derived_envelope(raw: bytes) -> Envelope:
    """The envelope RFC 8621 §7 derives from the headers; Refused when it has no recipient."""
    fields = header_fields(raw)
    check_recipients(
        [
            address.email
            for name, value in fields
            if name in _RECIPIENT_FIELDS
            for address in parse_address_list(value)
        ],
        None,
    )
    try:
        return envelope_from_headers(raw)
    except OutboundError as error:
        raise Refused(set_error("noRecipients", str(error))) from None


def check_recipients(emails: list[str], most: int | None) -> None:
    """Refuse recipients that are no mailbox (``invalidRecipients``) or too many of them."""
    invalid = list(dict.fromkeys(email for email in emails if not is_mailbox(email)))
    if invalid:
        error = set_error(
            "invalidRecipients", f"These are no addresses one can send to: {', '.join(invalid)}."
        )
        raise Refused({**error, "invalidRecipients": invalid})
    if most is not None and len(emails) > most:
        error = set_error(
            "tooManyRecipients",
            f"A message may go to at most {most} recipients, not {len(emails)}.",
        )
        raise Refused({**error, "maxRecipients": most})


def _parse_until(text: str) -> datetime:
    value = text.strip()
    if value[-1:] in ("Z", "z"):
        value = value[:-1] + "+00:00"
    parsed = datetime.fromisoformat(value) if "T" in value.upper() else None
    if parsed is None or parsed.tzinfo is None:
        raise ValueError(text)
    return parsed.astimezone(UTC)


def release_time(envelope: Envelope, now: datetime, longest: int) -> datetime | None:
    """The FUTURERELEASE time the envelope asks for (None: none); Refused when it may not."""
    parameters: dict[str, Any] = {
        key.upper(): item for key, item in (envelope["mailFrom"]["parameters"] or {}).items()
    }
    if not {"HOLDFOR", "HOLDUNTIL"} & set(parameters):
        return None
    hold_for, hold_until = parameters.get("HOLDFOR"), parameters.get("HOLDUNTIL")
    if not longest:
        raise _invalid_envelope("This server does not hold messages for a later release.")
    if "HOLDFOR" in parameters and "HOLDUNTIL" in parameters:
        raise _invalid_envelope("Give HOLDFOR or HOLDUNTIL, not both.")
    try:
        if "HOLDFOR" in parameters:
            if not isinstance(hold_for, str) or not _HOLDFOR.fullmatch(hold_for):
                raise ValueError(hold_for)
            release = now + timedelta(seconds=int(hold_for))
        else:
            release = max(now, _parse_until(str(hold_until or "")))
    except ValueError:
        raise _invalid_envelope(
            "HOLDFOR is a number of seconds and HOLDUNTIL a date-time like 2024-03-01T09:00:00Z."
        ) from None
    if release > now + timedelta(seconds=longest):
        raise _invalid_envelope(
            f"A message may be held at most {longest} seconds (maxDelayedSend)."
        )
    return release
