"""Data keys wrapped by the master key (the default; ``MAILROOM_KEY_WRAPPER=master``).

The master key is the one that seals account passwords (:mod:`mailroom.secrets`),
kept outside the data dir. Wrapped form: ``b"mk1" + nonce(12) + ciphertext+tag``.
"""

from __future__ import annotations

import secrets as _random

from mailroom.crypto.wrapping import NONCE, key_fingerprint, seal, unseal

_PREFIX = b"mk1"


class MasterKeyWrapper:
    """A :class:`~mailroom.crypto.wrapping.KeyWrapper` over one 32-byte master key."""

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("the master key must be 32 bytes")
        self._key = key
        self._id = key_fingerprint(key, "master")

    @property
    def key_id(self) -> str:
        """``master:<12 hex digits>``, a fingerprint of the master key."""
        return self._id

    def wrap(self, data_key: bytes, context: str) -> bytes:
        """Seal ``data_key`` under the master key, bound to ``context``."""
        return seal(self._key, _PREFIX, data_key, context, _random.token_bytes(NONCE))

    def unwrap(self, wrapped: bytes, context: str) -> bytes:
        """Open a data key wrapped by this master key for ``context``."""
        return unseal(self._key, _PREFIX, wrapped, context, "data key")
