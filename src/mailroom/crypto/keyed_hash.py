"""HMAC-SHA256 of many values under one key, from states keyed once (RFC 2104).

Per value, ``hmac.new`` keys both SHA-256 states again; here they are keyed
once and copied per value, which halves the cost when every word of a
message is hashed. Only ``hashlib``: parse workers import it without the
cryptography package or the database layer.
"""

from __future__ import annotations

import hashlib

_BLOCK = 64  # SHA-256's block size


class KeyedHash:
    """``hmac.new(key, value, sha256)`` for many values (``key`` at most 64 bytes)."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        if len(key) > _BLOCK:
            raise ValueError("A keyed hash takes a key of at most 64 bytes.")
        block = key.ljust(_BLOCK, b"\0")
        self._inner = hashlib.sha256(bytes(byte ^ 0x36 for byte in block))
        self._outer = hashlib.sha256(bytes(byte ^ 0x5C for byte in block))

    def digest(self, value: str) -> bytes:
        """The 32-byte HMAC of ``value`` (as UTF-8)."""
        first = self._inner.copy()
        first.update(value.encode("utf-8"))
        second = self._outer.copy()
        second.update(first.digest())
        return second.digest()

    def hexdigest(self, value: str) -> str:
        """:meth:`digest` in 64 hex digits."""
        return self.digest(value).hex()
