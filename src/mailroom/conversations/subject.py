"""Reply prefixes and the subject key used by the subject rescue (threading stage 3).

A *reply prefix* is one of the words mail clients put before a subject when
answering or forwarding, in the languages mailroom is used in plus those
common European clients emit::

    re  fwd  fw  aw  wg  antw  sv  vs  res  rif  tr  doorst

matched case-insensitively, optionally with a counter (``Re[2]:``,
``Re(3):``, ``RE^2:``) and followed by a colon (ASCII or full-width).
Prefixes repeat (``AW: Re: Fwd:``) and may be mixed with bracketed tags
(``[list] Re:``, ``Re: [list] Re:``) and the counter-less list style
``Re: Re[2]:``.

``subject_key`` strips all of that (and bracketed tags anywhere in the
prefix run), collapses whitespace and case-folds, so ``AW: [ilug] Re: Plan``
and ``plan`` have the same key. ``is_reply`` says whether a reply prefix was
present at all: only such a message is ever threaded by subject.

The key is stored on the message (``messages.subject_key``) as a SHA-1 of the
normalized text, so the rescue is one indexed lookup and the column stays
small whatever the subject length.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mailroom.crypto.message_fields import LookupKeys

REPLY_PREFIXES = ("re", "fwd", "fw", "aw", "wg", "antw", "sv", "vs", "res", "rif", "tr", "doorst")

_PREFIX = re.compile(
    r"^\s*(?:" + "|".join(REPLY_PREFIXES) + r")"
    r"\s*(?:\[\s*\d+\s*\]|\(\s*\d+\s*\)|\^\s*\d+)?\s*[:：]",
    re.IGNORECASE,
)
_TAG = re.compile(r"^\s*\[[^\[\]]*\]")
_TRAILING_FWD = re.compile(r"\s*\((?:fwd|fw)\)\s*$", re.IGNORECASE)
_SPACE = re.compile(r"\s+")
_CACHED_SUBJECTS = 16_384  # a conversation's subject is split for every message of it
_CACHED_LENGTH = 1_000  # longer subjects are split afresh, so the cache stays small


def split_subject(subject: str) -> tuple[bool, str]:
    """(whether a reply prefix was found, the subject without prefixes and leading tags).

    Cached for subjects of ordinary length: the subject rescue splits the
    subject of every message it reads, and a conversation shares a few.
    """
    if len(subject or "") > _CACHED_LENGTH:
        return _split(subject)
    return _split_cached(subject or "")


@lru_cache(maxsize=_CACHED_SUBJECTS)
def _split_cached(subject: str) -> tuple[bool, str]:
    """``_split`` remembered for the most recent subjects."""
    return _split(subject)


def _split(subject: str) -> tuple[bool, str]:
    """Strip reply prefixes and leading tags (see the module docstring)."""
    rest = subject or ""
    reply = False
    while True:
        match = _PREFIX.match(rest)
        if match:
            reply = True
            rest = rest[match.end() :]
            continue
        tag = _TAG.match(rest)
        # A leading tag is stripped only when a prefix or more text follows it, so a
        # subject that is nothing but "[list]" keeps its text.
        if tag and rest[tag.end() :].strip():
            rest = rest[tag.end() :]
            continue
        break
    trailing = _TRAILING_FWD.search(rest)
    if trailing and rest[: trailing.start()].strip():
        reply = True
        rest = rest[: trailing.start()]
    return reply, _SPACE.sub(" ", rest).strip()


def is_reply(subject: str) -> bool:
    """True when the subject carries a reply or forward prefix (``Re:``, ``AW: Re:``, ...)."""
    return split_subject(subject)[0]


def normalized_subject(subject: str) -> str:
    """The subject without reply prefixes and list tags, whitespace collapsed, case-folded."""
    return split_subject(subject)[1].casefold()


def key_hash(normalized: str) -> str:
    """SHA-1 hex of a normalized subject: what ``messages.subject_key`` holds (indexed)."""
    return hashlib.sha1(normalized.encode("utf-8"), usedforsecurity=False).hexdigest()


def subject_key(subject: str, lookups: LookupKeys | None = None) -> str | None:
    """The stored lookup key of a subject; None if empty.

    SHA-1 hex of the normalized text, or, for an owner whose mail is sealed
    (``lookups``), the owner's keyed hash of it (``crypto.message_fields``).
    The subject rescue finds candidates by equality on this indexed key
    instead of scanning subjects.
    """
    text = normalized_subject(subject)
    if not text:
        return None
    return key_hash(text) if lookups is None else lookups.stored_subject_key(text)
