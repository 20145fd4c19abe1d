"""Owners' data keys: one random 32-byte key per owner and version, stored wrapped.

The newest version encrypts; every version still stored decrypts (an owner
key rotation keeps both until its values are re-encrypted). Keys are
unwrapped once per :class:`OwnerKeys` (one unit of work) and kept in memory
only there. Deleting an owner's rows of ``owner_keys`` is crypto-shredding:
what they encrypted can no longer be read, wherever a copy of it lies.
"""

from __future__ import annotations

import secrets as _random

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from mailroom.crypto.datakey import DataKey
from mailroom.crypto.wrapping import KeyWrapper
from mailroom.errors import ConfigError
from mailroom.store.models import OwnerKey

KEY_BYTES = 32

__all__ = ["KEY_BYTES", "DataKey", "KeyGone", "OwnerKeys", "wrap_context"]


class KeyGone(ConfigError):
    """The data key a value needs is not stored (its owner was deleted, or a version retired)."""


def wrap_context(owner: int, version: int) -> str:
    """The associated data binding a wrapped key to its owner and version."""
    return f"owner:{owner}:key:{version}"


class OwnerKeys:
    """Finds, creates and unwraps data keys within one session."""

    def __init__(self, session: Session, wrapper: KeyWrapper) -> None:
        self.session = session
        self.wrapper = wrapper
        self._cache: dict[tuple[int, int], DataKey] = {}
        # The newest version per owner, looked up once per unit of work: a query per sealed
        # value cost more than the sealing. A rotation started meanwhile is caught by the
        # rotation's closing pass (mailroom.crypto.owner_rotation).
        self._newest: dict[int, int] = {}
        # The stored versions per owner, once per unit of work: every look-up of a sealed
        # Message-ID hashes it under each version (threading asked thousands of times).
        self._versions: dict[int, list[int]] = {}

    def versions(self, owner: int) -> list[int]:
        """The versions stored for ``owner``, oldest first."""
        found = self._versions.get(owner)
        if found is None:
            rows = self.session.scalars(
                select(OwnerKey.version).where(OwnerKey.user_id == owner).order_by(OwnerKey.version)
            )
            found = self._versions[owner] = list(rows)
        return list(found)

    def current(self, owner: int) -> DataKey:
        """The newest data key of ``owner``, made (version 1) on first use."""
        newest = self._newest.get(owner)
        if newest is None:
            newest = self.session.scalar(
                select(func.max(OwnerKey.version)).where(OwnerKey.user_id == owner)
            )
        if newest is None:
            return self._create(owner, 1)
        self._newest[owner] = int(newest)
        return self.version(owner, int(newest))

    def version(self, owner: int, version: int) -> DataKey:
        """Data key ``version`` of ``owner``; KeyGone when it is not stored."""
        cached = self._cache.get((owner, version))
        if cached is not None:
            return cached
        row = self.session.scalar(
            select(OwnerKey).where(OwnerKey.user_id == owner, OwnerKey.version == version)
        )
        if row is None:
            raise KeyGone(
                f"Data key version {version} of owner {owner} is not stored (the owner was "
                "deleted or the version retired), so this value cannot be read."
            )
        key = DataKey(
            owner, version, self.wrapper.unwrap(row.wrapped, wrap_context(owner, version))
        )
        self._cache[(owner, version)] = key
        return key

    def add_version(self, owner: int) -> DataKey:
        """A new, newest data key version for ``owner`` (the older ones stay valid)."""
        newest = self.session.scalar(
            select(func.max(OwnerKey.version)).where(OwnerKey.user_id == owner)
        )
        return self._create(owner, int(newest or 0) + 1)

    def drop_versions_before(self, owner: int, version: int) -> int:
        """Delete ``owner``'s key versions older than ``version``; how many were deleted."""
        result = self.session.execute(
            delete(OwnerKey).where(OwnerKey.user_id == owner, OwnerKey.version < version)
        )
        for cached in [k for k in self._cache if k[0] == owner and k[1] < version]:
            del self._cache[cached]
        self._newest.pop(owner, None)
        self._versions.pop(owner, None)
        return int(getattr(result, "rowcount", 0) or 0)

    def _create(self, owner: int, version: int) -> DataKey:
        key = _random.token_bytes(KEY_BYTES)
        row = OwnerKey(
            user_id=owner,
            version=version,
            wrapped=self.wrapper.wrap(key, wrap_context(owner, version)),
            wrapped_by=self.wrapper.key_id,
        )
        self._versions.pop(owner, None)
        try:
            # A savepoint: another worker making the same version first is no error here.
            with self.session.begin_nested():
                self.session.add(row)
        except IntegrityError:
            return self.version(owner, version)
        made = self._cache[(owner, version)] = DataKey(owner, version, key)
        self._newest[owner] = version
        return made
