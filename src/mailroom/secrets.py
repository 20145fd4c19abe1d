"""Credentials encrypted at rest under a master key that never enters the database.

* The master key is 32 random bytes, written as URL-safe base64 (44 characters).
  It comes from ``MAILROOM_MASTER_KEY`` or from the file named by
  ``MAILROOM_MASTER_KEY_FILE`` (``mailroom keys init`` creates one, mode 0600).
  The file must lie outside the data dir: a backup or copy of the data dir
  alone must never be enough to read the passwords in it.
* A secret is sealed with AES-256-GCM: ``b"mr1" + nonce(12) + ciphertext+tag``.
  The associated data names what the secret belongs to (``"account:7"``), so a
  ciphertext copied onto another account does not decrypt.
* Losing the key loses the secrets (owners re-enter their passwords); a wrong
  key is reported in one sentence, never as a traceback.
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets as _random
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mailroom.config import Settings
from mailroom.errors import ConfigError

__all__ = [
    "SecretBox",
    "default_key_file",
    "generate_key",
    "load_master_key",
    "write_key_file",
]

_VERSION = b"mr1"
_NONCE = 12


def generate_key() -> str:
    """A new master key as URL-safe base64 text."""
    return base64.urlsafe_b64encode(_random.token_bytes(32)).decode("ascii")


def _decode_key(text: str, where: str) -> bytes:
    try:
        key = base64.urlsafe_b64decode(text.strip().encode("ascii"))
    except (binascii.Error, ValueError, UnicodeEncodeError):
        key = b""
    if len(key) != 32:
        raise ConfigError(
            f"The master key in {where} is not a valid key (44 characters of base64); "
            "create one with `mailroom keys init`."
        )
    return key


def _inside(path: Path, directory: Path) -> bool:
    try:
        path.resolve().relative_to(directory.resolve())
    except ValueError:
        return False
    return True


def default_key_file() -> Path:
    """Where ``mailroom keys init`` writes the key when not told otherwise."""
    import platformdirs

    return Path(platformdirs.user_config_dir("mailroom")) / "master.key"


def load_master_key(settings: Settings) -> bytes:
    """The master key from the environment or the key file; ConfigError in plain words."""
    if settings.master_key is not None and settings.master_key.get_secret_value().strip():
        return _decode_key(settings.master_key.get_secret_value(), "MAILROOM_MASTER_KEY")
    path = settings.master_key_file
    if path is None:
        raise ConfigError(
            "No master key is set, so passwords cannot be stored; run `mailroom keys init` and "
            "set MAILROOM_MASTER_KEY_FILE to the file it names."
        )
    if _inside(path, settings.data_dir):
        raise ConfigError(
            f"The master key file {path} lies inside the data dir {settings.data_dir}; move it "
            "elsewhere so a copy of the data alone cannot decrypt the passwords."
        )
    return read_key_file(path, "master key file", "; create it with `mailroom keys init`")


def read_key_file(path: Path, what: str, missing_hint: str = "") -> bytes:
    """The 32-byte key in ``path`` (the master key's format); a ConfigError naming ``what``."""
    try:
        text = path.expanduser().read_text(encoding="ascii")
    except FileNotFoundError:
        raise ConfigError(f"The {what} {path} does not exist{missing_hint}.") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or "not a key file"
        raise ConfigError(f"The {what} {path} cannot be read ({reason}).") from None
    return _decode_key(text, str(path))


def write_key_file(path: Path, data_dir: Path) -> Path:
    """Create a new key file (mode 0600); refuses to overwrite or to write inside the data dir."""
    path = path.expanduser()
    if _inside(path, data_dir):
        raise ConfigError(
            f"{path} lies inside the data dir {data_dir}; choose a key file outside it."
        )
    if path.exists():
        raise ConfigError(
            f"{path} already exists; a new key would make every stored password unreadable, "
            "so it is left alone."
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise ConfigError(f"Cannot create {path} ({exc.strerror}).") from None
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(generate_key() + "\n")
    return path


class SecretBox:
    """Seals and opens secrets with AES-256-GCM under the master key."""

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("the master key must be 32 bytes")
        self._aead = AESGCM(key)

    @classmethod
    def from_settings(cls, settings: Settings) -> SecretBox:
        """A box with the configured master key."""
        return cls(load_master_key(settings))

    def seal(self, plaintext: bytes, context: str) -> bytes:
        """Encrypt ``plaintext`` bound to ``context`` (e.g. ``"account:7"``)."""
        nonce = _random.token_bytes(_NONCE)
        return _VERSION + nonce + self._aead.encrypt(nonce, plaintext, context.encode())

    def open(self, token: bytes, context: str) -> bytes:
        """Decrypt a sealed secret; ConfigError when the key or context does not fit."""
        if not token.startswith(_VERSION) or len(token) < len(_VERSION) + _NONCE + 16:
            raise ConfigError("A stored secret is damaged; enter the password again.")
        nonce = token[len(_VERSION) : len(_VERSION) + _NONCE]
        try:
            return self._aead.decrypt(nonce, token[len(_VERSION) + _NONCE :], context.encode())
        except InvalidTag:
            raise ConfigError(
                "A stored password cannot be decrypted with this master key; set the key it was "
                "stored with (MAILROOM_MASTER_KEY or MAILROOM_MASTER_KEY_FILE)."
            ) from None
