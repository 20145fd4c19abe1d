"""The OAuth ``state``: HMAC-signed, expiring, and bound to the flow that issued it.

A state is ``<expires>.<nonce>.<mac>``: the expiry (Unix seconds), 16 random
bytes, and an HMAC-SHA256 over both *and the flow's binding* — a string naming
what the answer may complete (provider, client id and redirect URI for the
command-line flow; a web session later). The binding is not in the state itself,
so the browser learns nothing from it, and a state issued for one flow does not
verify for another.

The HMAC key is derived (HKDF-SHA256, its own ``info``) from the master key of
:mod:`mailroom.secrets`, so the state needs no key of its own and the master key
is never used directly for two purposes. Verifying checks the MAC first, in
constant time (:func:`hmac.compare_digest`), and only then the expiry; every
failure is a :class:`StateError`, one plain sentence that does not say which part
was wrong.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mailroom.config import Settings
from mailroom.providers.base import AuthError
from mailroom.secrets import load_master_key

__all__ = ["DEFAULT_TTL", "StateError", "StateSigner"]

DEFAULT_TTL = 600.0  # seconds a browser has to come back
_INFO = b"mailroom oauth state v1"


class StateError(AuthError):
    """The ``state`` that came back was not issued for this flow, was altered, or expired."""

    def __init__(self) -> None:
        super().__init__(
            "The sign-in answer does not belong to this connection attempt (or it came too "
            "late), so it was refused; start the connection again.",
            reason="OAuth state mismatch",
        )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class StateSigner:
    """Issues and verifies signed ``state`` values under one key."""

    def __init__(self, key: bytes, *, clock: Callable[[], float] = time.time) -> None:
        if len(key) < 32:
            raise ValueError("the state key must be at least 32 bytes")
        self._key = key
        self._clock = clock

    @classmethod
    def from_master_key(
        cls, master_key: bytes, *, clock: Callable[[], float] = time.time
    ) -> StateSigner:
        """A signer whose key is derived from mailroom's master key."""
        hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO)
        return cls(hkdf.derive(master_key), clock=clock)

    @classmethod
    def from_settings(cls, settings: Settings) -> StateSigner:
        """A signer keyed by the configured master key (ConfigError when there is none)."""
        return cls.from_master_key(load_master_key(settings))

    def _mac(self, binding: str, body: str) -> str:
        message = binding.encode("utf-8") + b"\x00" + body.encode("ascii")
        return _b64(hmac.new(self._key, message, hashlib.sha256).digest())

    def issue(self, binding: str, ttl: float = DEFAULT_TTL) -> str:
        """A new state for the flow named by ``binding``, valid for ``ttl`` seconds."""
        body = f"{int(self._clock() + ttl)}.{_b64(secrets.token_bytes(16))}"
        return f"{body}.{self._mac(binding, body)}"

    def verify(self, state: str, binding: str) -> None:
        """Accept ``state`` only if this signer issued it for ``binding`` and it is unexpired."""
        body, _, mac = state.rpartition(".")
        expected = self._mac(binding, body) if body.isascii() else ""
        if not body or not hmac.compare_digest(mac.encode("ascii", "replace"), expected.encode()):
            raise StateError()
        expires, _, _ = body.partition(".")
        if not expires.isdigit() or int(expires) < self._clock():
            raise StateError()
