"""The IMAP side of the mirror: IMAP's flag names, translated for :mod:`mailroom.ingest.mirror`.

Everything provider-neutral — locations, folder labels, seen/starred, keywords,
orphans and "pending local changes win" — lives in :mod:`mailroom.ingest.mirror`.
IMAP only says how its flags map:

============== =============== ==========================================
IMAP flag      mailroom        JMAP keyword
============== =============== ==========================================
``\\Seen``      ``seen_at``     ``$seen``
``\\Flagged``   Starred label   ``$flagged``
``\\Answered``  keyword row     ``$answered``
``\\Draft``     keyword row     ``$draft``
``$Forwarded``  keyword row     ``$forwarded`` (likewise ``$Junk``,
                                ``$NotJunk``, ``$Phishing``, ``$MDNSent``)
any keyword    keyword row     the keyword, lower-cased (``Work`` → ``work``)
============== =============== ==========================================

``\\Deleted``, ``\\Recent`` and other system flags are not keywords. A
keyword that is not a valid JMAP keyword is ignored. The keywords a folder
*defines* (its FLAGS answer) are the scope of removals: a stored keyword the
folder has never heard of (one the server could not store, see the
propagator's PERMANENTFLAGS check) stays local. These wrappers take IMAP flag
sets (lower-cased, :func:`normalize_flags`) where the neutral functions take
:class:`~mailroom.ingest.mirror.Flags`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from sqlalchemy.orm import Session

from mailroom.ingest import mirror
from mailroom.ingest.mirror import AccountScope, ChangeSet, Flags, Placed
from mailroom.labels.keywords import parse_keyword

__all__ = [
    "FLAGGED",
    "SEEN",
    "add_locations",
    "apply_flags",
    "flag_of",
    "flag_state",
    "keywords_of",
    "normalize_flags",
]

SEEN = "\\seen"
FLAGGED = "\\flagged"
# System flags that are keywords; every other backslash flag is not one.
_SYSTEM_KEYWORDS = {"\\answered": "$answered", "\\draft": "$draft"}
# How keywords are spelled on the server (RFC 5788 registry); others as stored.
_SPELLING = {
    "$answered": "\\Answered",
    "$draft": "\\Draft",
    "$forwarded": "$Forwarded",
    "$junk": "$Junk",
    "$notjunk": "$NotJunk",
    "$phishing": "$Phishing",
    "$mdnsent": "$MDNSent",
}


def normalize_flags(flags: Iterable[bytes | str]) -> frozenset[str]:
    """Flags as lower-case text (``b'\\\\Seen'`` → ``'\\\\seen'``)."""
    return frozenset(
        (f.decode("utf-8", "replace") if isinstance(f, bytes) else str(f)).lower() for f in flags
    )


def keywords_of(flags: Iterable[str]) -> frozenset[str]:
    """The JMAP keywords (neither ``$seen`` nor ``$flagged``) of normalized IMAP flags."""
    found: set[str] = set()
    for flag in flags:
        if flag in _SYSTEM_KEYWORDS:
            found.add(_SYSTEM_KEYWORDS[flag])
        elif not flag.startswith("\\") and (keyword := parse_keyword(flag)) is not None:
            found.add(keyword)
    return frozenset(found)


def flag_of(keyword: str) -> str:
    """The IMAP flag that carries a stored keyword (``$answered`` → ``\\\\Answered``)."""
    return _SPELLING.get(keyword, keyword)


def flag_state(flags: frozenset[str], defined: frozenset[str] | None = None) -> Flags:
    """The neutral state of normalized IMAP flags; ``defined``: the folder's FLAGS answer."""
    return Flags(
        seen=SEEN in flags,
        starred=FLAGGED in flags,
        keywords=keywords_of(flags),
        keyword_scope=keywords_of(defined) if defined else None,
    )


def add_locations(
    session: Session,
    scope: AccountScope,
    changes: ChangeSet,
    folder_id: int,
    uidvalidity: int,
    entries: Sequence[tuple[int, int, frozenset[str] | None]],
    *,
    defined: frozenset[str] | None = None,
) -> None:
    """Record (message id, UID, IMAP flags) locations in a folder (see ``ingest.mirror``)."""
    placed = [
        Placed(mid, None if flags is None else flag_state(flags, defined), uid)
        for mid, uid, flags in entries
    ]
    mirror.add_locations(session, scope, changes, folder_id, placed, uidvalidity=uidvalidity)


def apply_flags(
    session: Session,
    scope: AccountScope,
    changes: ChangeSet,
    flags: Mapping[int, frozenset[str]],
    *,
    pending: set[int] | None = None,
    defined: frozenset[str] | None = None,
) -> set[int]:
    """Mirror IMAP flag sets (seen, flagged, keywords); returns the changed ids."""
    states = {mid: flag_state(f, defined) for mid, f in flags.items()}
    return mirror.apply_flags(session, scope, changes, states, pending=pending)
