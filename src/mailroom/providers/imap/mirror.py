"""The IMAP side of the mirror: IMAP's flag names, translated for :mod:`mailroom.ingest.mirror`.

Everything provider-neutral — locations, folder labels, seen/starred, orphans and
"pending local changes win" — lives in :mod:`mailroom.ingest.mirror`. IMAP only
says how its flags map: ``\\Seen`` → seen, ``\\Flagged`` → starred. These two
wrappers take IMAP flag sets (lower-cased, :func:`normalize_flags`) where the
neutral functions take :class:`~mailroom.ingest.mirror.Flags`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from sqlalchemy.orm import Session

from mailroom.ingest import mirror
from mailroom.ingest.mirror import AccountScope, ChangeSet, Flags, Placed

__all__ = ["FLAGGED", "SEEN", "add_locations", "apply_flags", "flag_state", "normalize_flags"]

SEEN = "\\seen"
FLAGGED = "\\flagged"


def normalize_flags(flags: Iterable[bytes | str]) -> frozenset[str]:
    """Flags as lower-case text (``b'\\\\Seen'`` → ``'\\\\seen'``)."""
    return frozenset(
        (f.decode("utf-8", "replace") if isinstance(f, bytes) else str(f)).lower() for f in flags
    )


def flag_state(flags: frozenset[str]) -> Flags:
    """The neutral state of normalized IMAP flags."""
    return Flags(seen=SEEN in flags, starred=FLAGGED in flags)


def add_locations(
    session: Session,
    scope: AccountScope,
    changes: ChangeSet,
    folder_id: int,
    uidvalidity: int,
    entries: Sequence[tuple[int, int, frozenset[str] | None]],
) -> None:
    """Record (message id, UID, IMAP flags) locations in a folder (see ``ingest.mirror``)."""
    placed = [
        Placed(mid, None if flags is None else flag_state(flags), uid)
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
) -> set[int]:
    """Mirror IMAP flag sets (``\\Seen``, ``\\Flagged``); returns the changed ids."""
    states = {mid: flag_state(f) for mid, f in flags.items()}
    return mirror.apply_flags(session, scope, changes, states, pending=pending)
