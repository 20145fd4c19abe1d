"""The backup key: derived from the master key, or the operator's own key file.

* By default the backup key is derived from the master key with HKDF-SHA256
  (``info`` names its purpose, so it is never the key that seals passwords).
  A new machine that has the master key (which it needs anyway, to read the
  stored passwords) can restore the backup.
* ``--key-file F`` uses the 32-byte key in ``F`` instead (the master key's
  format; ``mailroom keys init --file F`` makes one), for operators who keep
  backups under a key of their own, apart from the running engine's.

Each backup file has its own random file key, sealed in the file's header
under the backup key; the header names the key by a short id (an HMAC of a
fixed text under the key, which says nothing about the key), so a wrong key
is reported as such and not as damage.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from mailroom.config import Settings
from mailroom.errors import ConfigError
from mailroom.secrets import load_master_key, read_key_file

_INFO = b"mailroom backup key v1"


@dataclass(frozen=True)
class BackupKey:
    """A 32-byte backup key, where it came from (``master`` or ``file``) and its id."""

    key: bytes
    source: str

    @property
    def key_id(self) -> str:
        """16 hex digits naming the key without revealing it."""
        return hmac.new(self.key, b"mailroom backup key id", hashlib.sha256).hexdigest()[:16]


def backup_key(settings: Settings, key_file: Path | None = None) -> BackupKey:
    """The key ``--key-file`` names, else the one derived from the master key (ConfigError)."""
    if key_file is not None:
        return BackupKey(read_key_file(key_file, "backup key file"), "file")
    if settings.master_key is None and settings.master_key_file is None:
        raise ConfigError(
            "No backup key: set the master key (MAILROOM_MASTER_KEY_FILE) the backup key is "
            "derived from, or give a key of your own with --key-file."
        )
    master = load_master_key(settings)
    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(master)
    return BackupKey(derived, "master")
