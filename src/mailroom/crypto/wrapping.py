"""The ``KeyWrapper`` protocol: what seals owners' data keys (envelope encryption).

A wrapper turns a 32-byte data key into an opaque blob and back, bound to a
context (``owner:7:key:2``) so a wrapped key copied onto another owner or
version does not open. Mailroom ships two (:mod:`mailroom.crypto.master_wrapper`,
:mod:`mailroom.crypto.keyfile_wrapper`); a real KMS plugs in as a third
class with the same three members, chosen in :mod:`mailroom.crypto.choice`.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mailroom.errors import ConfigError

NONCE = 12
TAG = 16


class KeyWrapper(Protocol):
    """Seals and opens data keys; ``key_id`` names the wrapping key (never reveals it)."""

    @property
    def key_id(self) -> str:
        """A short, stable name of the current wrapping key (stored beside each wrapped key)."""
        ...

    def wrap(self, data_key: bytes, context: str) -> bytes:
        """Seal ``data_key`` bound to ``context``."""
        ...

    def unwrap(self, wrapped: bytes, context: str) -> bytes:
        """Open a wrapped key; ConfigError in one sentence when key or context does not fit."""
        ...


def key_fingerprint(key: bytes, label: str) -> str:
    """A short id of ``key`` (an HMAC of a fixed text under it, which says nothing of the key)."""
    digest = hmac.new(key, b"mailroom key id v1", hashlib.sha256).hexdigest()[:12]
    return f"{label}:{digest}"


def seal(key: bytes, prefix: bytes, plaintext: bytes, context: str, nonce: bytes) -> bytes:
    """AES-256-GCM: ``prefix + nonce + ciphertext+tag`` with ``context`` as associated data."""
    return prefix + nonce + AESGCM(key).encrypt(nonce, plaintext, context.encode())


def unseal(key: bytes, prefix: bytes, token: bytes, context: str, what: str) -> bytes:
    """Open what :func:`seal` made; ConfigError naming ``what`` when it does not open."""
    if not token.startswith(prefix) or len(token) < len(prefix) + NONCE + TAG:
        raise ConfigError(f"A stored {what} is damaged or was wrapped by another kind of key.")
    start = len(prefix)
    try:
        return AESGCM(key).decrypt(
            token[start : start + NONCE], token[start + NONCE :], context.encode()
        )
    except InvalidTag:
        raise ConfigError(
            f"A stored {what} cannot be opened with the configured key; set the key it was "
            "wrapped with (see `mailroom keys` in docs/operations.md)."
        ) from None
