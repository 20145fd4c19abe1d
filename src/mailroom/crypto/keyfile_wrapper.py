"""Data keys wrapped by an operator key file, KMS style (``MAILROOM_KEY_WRAPPER=keyfile``).

The file (``MAILROOM_KEY_WRAPPER_FILE``, outside the data dir, mode 0600)
holds named key versions, one a line: ``NAME BASE64KEY`` (32 bytes each); ``#``
starts a comment. The last line is the current key, which wraps new keys;
the earlier ones still open what they wrapped — like a KMS key with versions,
so the operator rotates by appending a line and running
``mailroom keys rotate-master``. Each wrapped key names its key version:
``b"kf1" + len(name) + name + nonce(12) + ciphertext+tag``.
"""

from __future__ import annotations

import base64
import binascii
import secrets as _random
from pathlib import Path

from mailroom.crypto.wrapping import NONCE, seal, unseal
from mailroom.errors import ConfigError

_PREFIX = b"kf1"


def read_key_file(path: Path) -> list[tuple[str, bytes]]:
    """The (name, key) versions of an operator key file, oldest first; ConfigError otherwise."""
    try:
        text = path.read_text(encoding="ascii")
    except OSError as exc:
        raise ConfigError(f"The key file {path} cannot be read ({exc.strerror}).") from None
    except UnicodeDecodeError:
        raise ConfigError(f"The key file {path} is not a key file (not ASCII text).") from None
    versions: list[tuple[str, bytes]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        try:
            key = base64.urlsafe_b64decode(parts[1]) if len(parts) == 2 else b""
        except (binascii.Error, ValueError):
            key = b""
        if len(key) != 32 or len(parts[0].encode()) > 255:
            raise ConfigError(
                f"Line {number} of the key file {path} is not 'NAME BASE64KEY' with a 32-byte key."
            )
        versions.append((parts[0], key))
    if not versions:
        raise ConfigError(f"The key file {path} holds no key.")
    return versions


class KeyFileWrapper:
    """A :class:`~mailroom.crypto.wrapping.KeyWrapper` over an operator's versioned key file."""

    def __init__(self, versions: list[tuple[str, bytes]]) -> None:
        if not versions:
            raise ValueError("a key file wrapper needs at least one key")
        self._keys = dict(versions)
        self._current = versions[-1][0]

    @classmethod
    def from_file(cls, path: Path) -> KeyFileWrapper:
        """The wrapper of the key file at ``path``."""
        return cls(read_key_file(path))

    @property
    def key_id(self) -> str:
        """``keyfile:<name of the current version>``."""
        return f"keyfile:{self._current}"

    def wrap(self, data_key: bytes, context: str) -> bytes:
        """Seal ``data_key`` under the current key version, naming it in the result."""
        name = self._current.encode()
        prefix = _PREFIX + bytes([len(name)]) + name
        return seal(
            self._keys[self._current], prefix, data_key, context, _random.token_bytes(NONCE)
        )

    def unwrap(self, wrapped: bytes, context: str) -> bytes:
        """Open a key wrapped by any version still in the file."""
        if not wrapped.startswith(_PREFIX) or len(wrapped) < len(_PREFIX) + 1:
            raise ConfigError("A stored data key was not wrapped by a key file.")
        size = wrapped[len(_PREFIX)]
        name = wrapped[len(_PREFIX) + 1 : len(_PREFIX) + 1 + size].decode("ascii", "replace")
        key = self._keys.get(name)
        if key is None:
            raise ConfigError(
                f"A stored data key was wrapped by key version {name!r}, which the key file "
                "no longer holds."
            )
        return unseal(key, wrapped[: len(_PREFIX) + 1 + size], wrapped, context, "data key")
