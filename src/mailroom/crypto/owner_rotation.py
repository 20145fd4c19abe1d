"""Rotating one owner's data key: a new version now, their values re-encrypted in batches.

:func:`start_rotation` adds a data key version (new values use it at once)
and records a rotation from the previous version. :meth:`Rotator.run_batch`
re-encrypts up to ``batch`` values of one encrypted column
(:mod:`~mailroom.crypto.columns`) under the new version and stores how far
it got, in one transaction: a rotation killed between batches continues
after the last committed one, and a value already under the new version is
skipped, so a batch repeated after a kill changes nothing twice. A pass
that changed values is followed by another (a unit of work that read the
newest version before the rotation began may still have written under the
old one); the first pass that finds nothing left deletes the old versions
from the store and marks the rotation done; before that, that last pass
re-hashes the owner's blind search index (``crypto.blind_index``: tokens
cannot be re-encrypted, so each sealed message is indexed again from its
opened body) and their lookup hashes (``crypto.lookup_rotation``: messages'
Message-IDs, references and subject keys, contacts, and sealed submissions'
``message_key`` through ``crypto.submission_keys``), in batches as well.
Until then both versions open
values (each value names its version). A backup made before still holds
the old version, wrapped: see "Privacy at rest" in docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select, text, update
from sqlalchemy.orm import Session

from mailroom.audit import record
from mailroom.crypto.blind_index import reindex_owner_batch
from mailroom.crypto.columns import ENCRYPTED_COLUMNS, EncryptedColumn
from mailroom.crypto.datakeys import OwnerKeys
from mailroom.crypto.fields import FieldCipher, from_text, to_text, version_of
from mailroom.crypto.lookup_rotation import rehash_lookups
from mailroom.crypto.wrapping import KeyWrapper
from mailroom.store.engine import Store
from mailroom.store.models import Base, KeyRotation, User, utcnow

# Progress entries beside the columns' positions: values changed in this pass, the pass.
_CHANGED = "_changed"
_PASS = "_pass"
RowId = int | str  # a row's id: an integer, or a blob's key
_SEARCH = "_search_tokens"  # the last message whose blind index tokens were re-hashed


def running_rotation(session: Session, owner: int) -> KeyRotation | None:
    """The owner's unfinished rotation, if any."""
    return session.scalar(
        select(KeyRotation).where(KeyRotation.user_id == owner, KeyRotation.state == "running")
    )


def start_rotation(session: Session, keys: OwnerKeys, owner: int) -> KeyRotation:
    """A new data key version for ``owner`` and its rotation (the running one, if there is one)."""
    running = running_rotation(session, owner)
    if running is not None:
        return running
    previous = keys.current(owner).version
    new = keys.add_version(owner).version
    rotation = KeyRotation(user_id=owner, from_version=previous, to_version=new, progress={})
    session.add(rotation)
    session.flush()
    return rotation


def pending_rotations(session: Session) -> list[int]:
    """The ids of every unfinished rotation, oldest first."""
    query = select(KeyRotation.id).where(KeyRotation.state == "running").order_by(KeyRotation.id)
    return list(session.scalars(query))


@dataclass(frozen=True)
class Rotator:
    """Runs rotations' batches: the store, the key wrapper, values per batch, the columns."""

    store: Store
    wrapper: KeyWrapper
    batch: int = 500
    columns: Sequence[EncryptedColumn] = ENCRYPTED_COLUMNS

    def run_batch(self, rotation_id: int) -> bool:
        """Re-encrypt the next batch of the rotation in one transaction; True when it is done."""
        with self.store.session() as session:
            rotation = session.get(KeyRotation, rotation_id)
            if rotation is None or rotation.state == "done":
                return True
            cipher = FieldCipher(OwnerKeys(session, self.wrapper))
            progress = dict(rotation.progress)
            for column in self.columns:
                last = progress.get(column.name)  # the last row id done (an int or a key)
                if last == -1:
                    continue  # this column is finished in this pass
                rows = _next_rows(session, column, rotation.user_id, last, self.batch)
                changed = sum(
                    _reencrypt(session, cipher, column, rotation, row_id, value)
                    for row_id, value in rows
                )
                progress[_CHANGED] = int(progress.get(_CHANGED, 0)) + changed
                done = len(rows) < self.batch
                progress[column.name] = -1 if done else rows[-1][0]
                if not done:
                    rotation.progress = progress
                    return False
            if progress.get(_CHANGED, 0):
                # A closing pass: a unit of work that read the newest version before the
                # rotation began may have written an old-version value behind this pass.
                rotation.progress = {_CHANGED: 0, _PASS: int(progress.get(_PASS, 1)) + 1}
                return False
            if not _rehash_search_tokens(session, rotation.user_id, progress, self.batch):
                rotation.progress = progress
                return False
            if not rehash_lookups(session, rotation.user_id, progress, self.batch):
                rotation.progress = progress  # Message-IDs, references, subject keys
                return False
            rotation.progress = progress
            _finish(session, rotation, OwnerKeys(session, self.wrapper))
            return True

    def run(self, rotation_id: int) -> int:
        """Run batches until the rotation is done; how many batches that took."""
        batches = 1
        while not self.run_batch(rotation_id):
            batches += 1
        return batches


def _next_rows(
    session: Session, column: EncryptedColumn, owner: int, after: RowId | None, batch: int
) -> list[tuple[RowId, bytes | str]]:
    # Through the table's metadata: a JSON column's value comes back as its string.
    table = Base.metadata.tables[column.table]
    row_id, value = table.c[column.id_column], table.c[column.column]
    query = (
        select(row_id, value)
        .where(text(column.rows_of_owner).bindparams(owner=owner), value.is_not(None))
        .order_by(row_id)
        .limit(batch)
    )
    if after is not None:
        query = query.where(row_id > after)
    return [(row[0], row[1]) for row in session.execute(query)]


def _reencrypt(
    session: Session,
    cipher: FieldCipher,
    column: EncryptedColumn,
    rotation: KeyRotation,
    row_id: RowId,
    value: bytes | str,
) -> bool:
    """Re-encrypt one value under the new version; False when it is under it already."""
    sealed = from_text(value) if isinstance(value, str) else bytes(value)
    if version_of(sealed) >= rotation.to_version:
        return False  # written under the new version, or re-encrypted by a batch before a kill
    owner = rotation.user_id
    plain = cipher.decrypt(owner, column.table, column.column, row_id, sealed)
    fresh = cipher.encrypt(owner, column.table, column.column, row_id, plain)
    table = Base.metadata.tables[column.table]
    session.execute(
        update(table)
        .where(table.c[column.id_column] == row_id)
        .values({column.column: to_text(fresh) if column.text else fresh})
    )
    return True


def _rehash_search_tokens(
    session: Session, owner: int, progress: dict[str, int], batch: int
) -> bool:
    """The next batch of the blind index re-hashed under the new version; True when all are.

    Runs in the last pass only, before the old version goes: until then a query
    hashes its words under both versions, so sealed mail stays searchable throughout.
    """
    last = int(progress.get(_SEARCH, 0))
    if last < 0:
        return True
    done_to = reindex_owner_batch(session, owner, last, batch)
    progress[_SEARCH] = -1 if done_to is None else done_to
    return done_to is None


def _finish(session: Session, rotation: KeyRotation, keys: OwnerKeys) -> None:
    dropped = keys.drop_versions_before(rotation.user_id, rotation.to_version)
    rotation.state = "done"
    rotation.finished_at = utcnow()
    owner = session.get(User, rotation.user_id)
    record(
        session,
        "key.rotate",
        user_name=owner.name if owner is not None else None,
        user_id=rotation.user_id,
        detail=f"data key v{rotation.from_version} -> v{rotation.to_version}: values "
        f"re-encrypted, {dropped} old version(s) deleted",
    )
