"""Keywords of a message (RFC 8621 §4.1.1, IMAP flags): what is valid and where each lives.

A keyword is 1–255 characters of IMAP atom text (``%x21-%x7e`` without
``( ) { ] % * " \\``), compared case-insensitively and stored lower-cased.
Three homes:

* ``$seen`` is ``messages.seen_at`` (mailroom's read state);
* ``$flagged`` is the Starred label (and so the mailbox with role ``flagged``);
* every other keyword — ``$draft``, ``$answered``, ``$forwarded``, ``$junk``,
  ``$notjunk``, ``$phishing``, ``$mdnsent``, custom ones — is a row of
  ``message_keywords``.

``$draft`` is a keyword like the others, independent of the Drafts mailbox,
as IMAP's ``\\Draft`` flag is independent of the Drafts folder: a message can
sit in Drafts without it and carry it elsewhere. Writing keywords (with the
change log and the pending change) is the operations service's
(:meth:`mailroom.labels.operations.Operations.set_keywords`); this module only
validates and reads.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.store.chunks import in_chunks
from mailroom.store.models import MessageKeyword

__all__ = [
    "FLAGGED",
    "MAX_KEYWORD_LENGTH",
    "SEEN",
    "parse_keyword",
    "stored_keywords",
]

SEEN = "$seen"
FLAGGED = "$flagged"
MAX_KEYWORD_LENGTH = 255
_FORBIDDEN = frozenset('(){]%*"\\')


def parse_keyword(value: object) -> str | None:
    """The stored (lower-case) form of a keyword, or None when it is not a valid keyword."""
    if not isinstance(value, str) or not 1 <= len(value) <= MAX_KEYWORD_LENGTH:
        return None
    if any(not "\x21" <= char <= "\x7e" or char in _FORBIDDEN for char in value):
        return None
    return value.lower()


def stored_keywords(session: Session, message_ids: Iterable[int]) -> dict[int, set[str]]:
    """The ``message_keywords`` rows of each message (neither ``$seen`` nor ``$flagged``)."""
    found: dict[int, set[str]] = defaultdict(set)
    for chunk in in_chunks(sorted(set(message_ids))):
        for message_id, keyword in session.execute(
            select(MessageKeyword.message_id, MessageKeyword.keyword).where(
                MessageKeyword.message_id.in_(chunk)
            )
        ):
            found[message_id].add(keyword)
    return found
