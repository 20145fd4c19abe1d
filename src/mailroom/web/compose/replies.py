"""A new composition answering a stored message: reply, reply to all, forward.

* **Reply** goes to the message's Reply-To, else its From; **reply to all**
  adds its To and Cc, leaving out the user's own addresses and anyone named
  twice. Both quote the text under ``On <date>, <sender> wrote:`` with ``>``
  before each line, take the subject with one ``Re:`` in front, and thread:
  In-Reply-To is the message's Message-ID, References its References then
  that id (RFC 5322 §3.6.4).
* **Forward** has no recipients, the subject with ``Fwd:``, the forwarded
  message's headers and text under a separator, and its attachments (parts
  of the stored message, so nothing is uploaded again).

The identity is the one of the user's addresses the message was sent to,
else the caller's default. Answering one's own message (from Sent) goes to
its recipients.
"""

from __future__ import annotations

import re

from sqlalchemy.orm import Session

from mailroom.mime import ParsedMessage, parse_message
from mailroom.mime.addresses import Address
from mailroom.store.models import Identity
from mailroom.web.compose.drafts import attachments_of, raw_of
from mailroom.web.compose.form import Composition, address_text, addresses_text

__all__ = ["MODES", "answer"]

MODES = ("reply", "reply_all", "forward")
_RE = re.compile(r"^\s*(re|aw|sv)\s*:\s*", re.IGNORECASE)
_FWD = re.compile(r"^\s*(fwd?|wg)\s*:\s*", re.IGNORECASE)


def _prefixed(prefix: str, pattern: re.Pattern[str], subject: str) -> str:
    """``prefix: subject`` unless the subject already starts with such a prefix."""
    subject = subject.strip()
    return subject if pattern.match(subject) else f"{prefix}: {subject}".strip()


def _when(parsed: ParsedMessage) -> str:
    return parsed.date.strftime("%a, %d %b %Y at %H:%M") if parsed.date else "an earlier date"


def _quoted(parsed: ParsedMessage) -> str:
    who = address_text(parsed.from_[0]) if parsed.from_ else "someone"
    lines = parsed.text_body.rstrip().splitlines() or [""]
    quoted = "\n".join(f"> {line}" if line else ">" for line in lines)
    return f"\n\nOn {_when(parsed)}, {who} wrote:\n{quoted}\n"


def _forwarded(parsed: ParsedMessage) -> str:
    head = [
        "---------- Forwarded message ----------",
        f"From: {addresses_text(parsed.from_)}",
        f"Date: {_when(parsed)}",
        f"Subject: {parsed.subject}",
        f"To: {addresses_text(parsed.to)}",
    ]
    if parsed.cc:
        head.append(f"Cc: {addresses_text(parsed.cc)}")
    return "\n\n" + "\n".join(head) + "\n\n" + parsed.text_body.rstrip() + "\n"


def _unique(addresses: list[Address], own: set[str]) -> list[Address]:
    seen = set(own)
    kept = []
    for address in addresses:
        key = address.email.lower()
        if key and key not in seen:
            seen.add(key)
            kept.append(address)
    return kept


def _identity(parsed: ParsedMessage, identities: dict[str, Identity]) -> int | None:
    for address in [*parsed.to, *parsed.cc, *parsed.bcc]:
        found = identities.get(address.email.lower())
        if found is not None:
            return found.id
    return None


def answer(
    session: Session, user_id: int, message_id: int, mode: str, identities: dict[str, Identity]
) -> Composition | None:
    """The composition answering one of the user's messages in ``mode``; None if not theirs."""
    raw = raw_of(session, user_id, message_id)
    if raw is None or mode not in MODES:
        return None
    parsed = parse_message(raw)
    identity = _identity(parsed, identities)
    if mode == "forward":
        return Composition(
            identity=identity,
            subject=_prefixed("Fwd", _FWD, parsed.subject),
            body=_forwarded(parsed),
            attachments=tuple(attachments_of(session, user_id, message_id)),
        )
    own = set(identities)
    to = _unique(parsed.reply_to or parsed.from_, own) or _unique(parsed.to, own)
    cc: list[Address] = []
    if mode == "reply_all":
        cc = _unique([*parsed.to, *parsed.cc], own | {a.email.lower() for a in to})
    references = list(parsed.references)
    if parsed.message_id and parsed.message_id not in references:
        references.append(parsed.message_id)
    return Composition(
        identity=identity,
        to=addresses_text(to),
        cc=addresses_text(cc),
        subject=_prefixed("Re", _RE, parsed.subject),
        body=_quoted(parsed),
        in_reply_to=(parsed.message_id,) if parsed.message_id else (),
        references=tuple(references),
    )
