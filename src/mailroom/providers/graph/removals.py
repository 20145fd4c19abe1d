"""Removals kept on the account while a folder is still importing (SPEC §2, seed 000_5011...).

A delta's ``@removed`` says only that a message left a folder. While some folder
has not finished its first enumeration, the message may sit in that folder,
not yet seen; judging the removal then would delete mail that lives on. So the
removals are kept in the account's sync state (``sync_state`` key
:data:`KEY`: a list of ``[folder id, Graph id]``) and judged at the first sync
in which every folder answered. Seeing the message in the same folder again
drops its kept removal there (it came back).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.store.models import SyncState

__all__ = ["KEY", "drop_removals", "keep_removals", "take_removals"]

KEY = "graph.removals"


def _row(session: Session, account_id: int) -> SyncState | None:
    return session.scalar(
        select(SyncState).where(SyncState.account_id == account_id, SyncState.key == KEY)
    )


def _kept(row: SyncState | None) -> list[tuple[int, str]]:
    value = row.value if row is not None and isinstance(row.value, list) else []
    return [(int(f), str(g)) for f, g in value]


def _save(session: Session, account_id: int, kept: list[tuple[int, str]]) -> None:
    row = _row(session, account_id)
    value = [[f, g] for f, g in kept]
    if row is None:
        session.add(SyncState(account_id=account_id, key=KEY, value=value))
    else:
        row.value = value
    session.flush()


def keep_removals(session: Session, account_id: int, folder_id: int, ids: Iterable[str]) -> None:
    """Keep these removals of a folder for the first sync in which every folder answered."""
    new = [(folder_id, gid) for gid in ids]
    if not new:
        return
    kept = _kept(_row(session, account_id))
    _save(session, account_id, kept + [x for x in dict.fromkeys(new) if x not in kept])


def drop_removals(session: Session, account_id: int, folder_id: int, ids: Iterable[str]) -> None:
    """Forget kept removals of messages seen in the folder again."""
    row = _row(session, account_id)
    kept = _kept(row)
    seen = set(ids)
    left = [(f, g) for f, g in kept if not (f == folder_id and g in seen)]
    if len(left) != len(kept):
        _save(session, account_id, left)


def take_removals(session: Session, account_id: int) -> dict[int, list[str]]:
    """The kept removals by folder, forgetting them (they are being judged now)."""
    row = _row(session, account_id)
    by_folder: dict[int, list[str]] = {}
    for folder_id, gid in _kept(row):
        by_folder.setdefault(folder_id, []).append(gid)
    if row is not None and by_folder:
        _save(session, account_id, [])
    return by_folder
