"""Owner secrets: a per-owner key file outside the database, so deleting an owner reaches backups.

A backup (``mailroom backup create``) holds the database as it was, with
every owner's wrapped data key: while the key that wrapped them exists, an
owner deleted after the backup can still be read from it. With
``MAILROOM_OWNER_SECRETS_DIR`` set, :class:`OwnerSecretWrapper` seals each
wrapped data key once more, under a 32-byte secret of that owner kept as a
file in that directory (outside the data dir, like the master key, and not
part of any backup mailroom makes). Deleting the owner deletes the file
(:meth:`OwnerSecretWrapper.forget`, overwritten first): from then on their
data key opens nowhere — not in the live store, not in any earlier backup.

The directory is to the owners what the master key is to the installation:
restoring a backup needs it; keep it out of long-lived backups (or back it
up with a retention no longer than the promise made to deleted owners).
A data key wrapped before the directory was set (no ``os1`` prefix) still
opens with the inner wrapper alone; rewrapping it (``keys rotate-master``)
adds the owner layer.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets as _random
from pathlib import Path

from mailroom.crypto.datakeys import KeyGone
from mailroom.crypto.wrapping import NONCE, KeyWrapper, seal, unseal
from mailroom.errors import ConfigError

PREFIX = b"os1"
SECRET_BYTES = 32
_OWNER = re.compile(r"^owner:(\d+):")


def _owner_of(context: str) -> int:
    found = _OWNER.match(context)
    if found is None:
        raise ConfigError(f"A data key's context {context!r} names no owner.")
    return int(found.group(1))


class OwnerSecretWrapper:
    """A :class:`~mailroom.crypto.wrapping.KeyWrapper` that also needs the owner's secret file."""

    def __init__(self, inner: KeyWrapper, directory: Path) -> None:
        self.inner = inner
        self.directory = directory

    @property
    def key_id(self) -> str:
        """The inner wrapper's key id, marked as needing owner secrets."""
        return f"{self.inner.key_id}+owner"

    def wrap(self, data_key: bytes, context: str) -> bytes:
        """The inner wrapper's blob, sealed under the owner's secret (made on first use)."""
        secret = self._secret(_owner_of(context), create=True)
        assert secret is not None
        inner = self.inner.wrap(data_key, context)
        return seal(secret, PREFIX, inner, context, _random.token_bytes(NONCE))

    def unwrap(self, wrapped: bytes, context: str) -> bytes:
        """Open a wrapped key; KeyGone when the owner's secret was deleted."""
        if not wrapped.startswith(PREFIX):
            return self.inner.unwrap(wrapped, context)  # wrapped before secrets were set
        owner = _owner_of(context)
        secret = self._secret(owner, create=False)
        if secret is None:
            raise KeyGone(
                f"The secret of owner {owner} is not in {self.directory} (the owner was deleted, "
                "or MAILROOM_OWNER_SECRETS_DIR names the wrong directory), so their mail cannot "
                "be read."
            )
        inner = unseal(secret, PREFIX, wrapped, context, "owner-wrapped data key")
        return self.inner.unwrap(inner, context)

    def forget(self, owner: int) -> bool:
        """Overwrite and delete the owner's secret; whether there was one."""
        path = self._path(owner)
        try:
            with path.open("r+b") as handle:
                handle.write(b"\0" * SECRET_BYTES)
                handle.flush()
                os.fsync(handle.fileno())
        except FileNotFoundError:
            return False
        path.unlink(missing_ok=True)
        _sync_directory(self.directory)
        return True

    def _path(self, owner: int) -> Path:
        return self.directory / f"owner-{owner}.key"

    def _secret(self, owner: int, *, create: bool) -> bytes | None:
        path = self._path(owner)
        try:
            found = path.read_bytes()
        except FileNotFoundError:
            if not create:
                return None
            return self._create(path)
        except OSError as exc:
            raise ConfigError(f"The owner secret {path} cannot be read ({exc.strerror}).") from None
        if len(found) != SECRET_BYTES or not any(found):
            raise ConfigError(f"The owner secret {path} is damaged (not {SECRET_BYTES} bytes).")
        return found

    def _create(self, path: Path) -> bytes:
        """A new secret, published atomically: two processes creating it agree on one."""
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            secret = _random.token_bytes(SECRET_BYTES)
            temporary = path.with_name(f".{path.name}.{os.getpid()}.{_random.token_hex(4)}")
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(secret)
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(temporary, path)  # fails when another process published first
            except FileExistsError:
                secret = path.read_bytes()
            finally:
                with contextlib.suppress(FileNotFoundError):
                    temporary.unlink()
            _sync_directory(self.directory)
        except OSError as exc:
            raise ConfigError(
                f"The owner secret {path} cannot be written ({exc.strerror}); check "
                "MAILROOM_OWNER_SECRETS_DIR."
            ) from None
        return secret


def _sync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def forget_owner(wrapper: KeyWrapper | None, owner: int) -> bool:
    """Delete ``owner``'s secret when ``wrapper`` keeps owner secrets; whether one was deleted."""
    return isinstance(wrapper, OwnerSecretWrapper) and wrapper.forget(owner)
