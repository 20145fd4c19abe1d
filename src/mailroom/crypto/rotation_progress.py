"""How far each owner key rotation has come, in words (``mailroom keys status``).

Reads what :class:`~mailroom.crypto.owner_rotation.Rotator` stores in
``key_rotations.progress``: per registered column the last row done in this
pass (``-1``: the column is finished in this pass), the pass, the values
changed in it and, in the last pass, the last message whose blind search
tokens were re-hashed.

:func:`advance` is the step every resumable part of the last pass takes
(lookup columns, provider ids, submission keys): one batch after the last row
recorded, and the new last row, or -1 once the part is done.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from mailroom.crypto.columns import ENCRYPTED_COLUMNS, EncryptedColumn
from mailroom.store.models import KeyRotation, User


def advance(
    session: Session,
    owner: int,
    progress: MutableMapping[str, Any],
    batch: int,
    key: str,
    run: Callable[[Session, int, int, int], int | None],
) -> bool:
    """Run the next batch of one resumable part; True when that part is done.

    ``progress[key]`` holds the last row id done, -1 once finished, and stays
    absent while the part found nothing at all. ``run(session, owner, after,
    batch)`` does the rows after ``after`` and returns the last id, or None when
    none was left.
    """
    last = int(progress.get(key, 0))
    if last < 0:
        return True
    done_to = run(session, owner, last, batch)
    if done_to is None and key not in progress:
        return True  # nothing of this kind: nothing to record
    progress[key] = -1 if done_to is None else done_to
    return done_to is None


@dataclass(frozen=True)
class RotationProgress:
    """One rotation as ``keys status`` shows it."""

    id: int
    user: str
    from_version: int
    to_version: int
    state: str
    started_at: datetime
    finished_at: datetime | None
    pass_number: int
    columns_done: int
    columns: int
    current_column: str | None
    changed_this_pass: int
    rehashing_search: bool

    def describe(self) -> str:
        """One sentence: where the rotation stands."""
        versions = f"v{self.from_version} -> v{self.to_version}"
        head = f"Rotation {self.id} of {self.user} ({versions})"
        if self.state == "done":
            finished = self.finished_at.isoformat(timespec="seconds") if self.finished_at else "?"
            return f"{head}: done at {finished}; the old version is deleted."
        if self.rehashing_search:
            where = "re-hashing the search index (last pass)"
        else:
            now = f", now in {self.current_column}" if self.current_column else ""
            where = f"{self.columns_done} of {self.columns} columns done{now}"
        return (
            f"{head}: running since {self.started_at.isoformat(timespec='seconds')}, "
            f"pass {self.pass_number}, {where}; {self.changed_this_pass} value(s) re-encrypted "
            "in this pass. Both versions open meanwhile."
        )


def rotation_progress(
    session: Session,
    include_done: bool = False,
    columns: Sequence[EncryptedColumn] = ENCRYPTED_COLUMNS,
) -> list[RotationProgress]:
    """Every running rotation (and finished ones with ``include_done``), oldest first."""
    query = (
        select(KeyRotation, User.name)
        .join(User, User.id == KeyRotation.user_id)
        .order_by(KeyRotation.id)
    )
    if not include_done:
        query = query.where(KeyRotation.state == "running")
    return [_progress(rotation, name, columns) for rotation, name in session.execute(query)]


def _progress(
    rotation: KeyRotation, user: str, columns: Sequence[EncryptedColumn]
) -> RotationProgress:
    progress = dict(rotation.progress or {})
    done = [column for column in columns if progress.get(column.name) == -1]
    current = next(
        (column.name for column in columns if progress.get(column.name) not in (None, -1)), None
    )
    return RotationProgress(
        id=rotation.id,
        user=user,
        from_version=rotation.from_version,
        to_version=rotation.to_version,
        state=rotation.state,
        started_at=rotation.started_at,
        finished_at=rotation.finished_at,
        pass_number=int(progress.get("_pass", 1)),
        columns_done=len(done),
        columns=len(columns),
        current_column=current,
        changed_this_pass=int(progress.get("_changed", 0)),
        rehashing_search=len(done) == len(columns) and "_search_tokens" in progress,
    )
