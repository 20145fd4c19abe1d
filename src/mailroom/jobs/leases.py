"""Watch leases: only one process holds an account's watch connection.

A lease is a key with a TTL and a random token. ``acquire`` sets it only if
absent; ``renew`` and ``release`` act only while the caller's token is still
the one stored (compare-and-set), so a process that lost its lease (expired,
taken over after a crash) can never extend or delete the new owner's.

Holders renew every ttl/3 for as long as their watcher lives, including
while it backs off between reconnects; a failed renewal means the lease is
lost and the local watcher must be torn down.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from typing import Protocol

import redis


class Leases(Protocol):
    """A distributed lock with TTL and owner token."""

    def acquire(self, key: str, ttl_seconds: float) -> str | None:
        """The new token, or None when someone else holds the key."""

    def renew(self, key: str, token: str, ttl_seconds: float) -> bool:
        """Extend the lease; False when the token no longer owns it."""

    def release(self, key: str, token: str) -> None:
        """Give the lease up if the token still owns it."""


class LocalLeases:
    """In-process leases with expiry (embedded mode, and deterministic tests)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._held: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def _live(self, key: str) -> tuple[str, float] | None:
        held = self._held.get(key)
        if held and held[1] > self._clock():
            return held
        self._held.pop(key, None)
        return None

    def acquire(self, key: str, ttl_seconds: float) -> str | None:
        """Take the key if it is free or expired."""
        with self._lock:
            if self._live(key):
                return None
            token = secrets.token_hex(16)
            self._held[key] = (token, self._clock() + ttl_seconds)
            return token

    def renew(self, key: str, token: str, ttl_seconds: float) -> bool:
        """Extend while the token still owns the key."""
        with self._lock:
            held = self._live(key)
            if not held or held[0] != token:
                return False
            self._held[key] = (token, self._clock() + ttl_seconds)
            return True

    def release(self, key: str, token: str) -> None:
        """Drop the key if the token owns it."""
        with self._lock:
            held = self._live(key)
            if held and held[0] == token:
                del self._held[key]


_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


class RedisLeases:
    """Leases in Redis: SET NX PX to acquire, Lua compare-and-set to renew and release."""

    def __init__(self, client: redis.Redis, prefix: str = "mailroom:lease:") -> None:
        self._client = client
        self._prefix = prefix
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)

    def acquire(self, key: str, ttl_seconds: float) -> str | None:
        """Take the key if absent."""
        token = secrets.token_hex(16)
        ok = self._client.set(self._prefix + key, token, nx=True, px=int(ttl_seconds * 1000))
        return token if ok else None

    def renew(self, key: str, token: str, ttl_seconds: float) -> bool:
        """Extend while the token still owns the key."""
        result = self._renew(keys=[self._prefix + key], args=[token, int(ttl_seconds * 1000)])
        return bool(result)

    def release(self, key: str, token: str) -> None:
        """Drop the key if the token owns it."""
        self._release(keys=[self._prefix + key], args=[token])
