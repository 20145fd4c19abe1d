"""The backup file: a clear header, then a tar stream sealed in authenticated chunks.

Layout::

    MAGIC (16 bytes)  header length (4, big-endian)  header (JSON)
    sealed chunks (``backup.stream``) of a tar stream:
        manifest.json   format, mailroom version, store kind, schema revision,
                        created (UTC), per file: name, size, SHA-256
        store.sqlite3   (a VACUUM INTO copy)  or  store.pgdump  (pg_dump -Fc)

The header says which key opens the file (``master`` or ``file``, and the
key's id) and carries the file's random key sealed under the backup key;
the whole header is the associated data of every chunk, so it cannot be
edited either. Verifying decrypts every chunk (the tags are the checksum of
the file) and compares each file's SHA-256 with the manifest; nothing is
trusted, and nothing restored, before both pass.

A backup is written to ``.NAME.partial-<pid>-<random>`` beside its final
name, flushed to disk, and renamed over the final name only when complete,
so a killed backup leaves the earlier file under that name untouched and
never a half-written one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import json
import os
import re
import secrets
import struct
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mailroom.backup.keys import BackupKey
from mailroom.backup.stream import PREFIX, DamagedBackup, OpeningReader, SealingWriter
from mailroom.errors import ConfigError

MAGIC = b"MAILROOM-BACKUP\n"
FORMAT = 1
MANIFEST = "manifest.json"
DATA_FILES = {"sqlite": "store.sqlite3", "postgresql": "store.pgdump"}
_LENGTH = struct.Struct(">I")
_MAX_HEADER = 64 * 1024
_WRAP_AD = b"mailroom backup file key"
_READ = 1024 * 1024


@dataclass(frozen=True)
class Written:
    """A finished backup: where, how big, its SHA-256 and its manifest."""

    path: Path
    size: int
    sha256: str
    manifest: dict[str, Any]


class _Hashing:
    """A file wrapper hashing and counting what passes through ``write``."""

    def __init__(self, out: BinaryIO) -> None:
        self.out = out
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.out.write(data)


def file_digest(path: Path) -> tuple[int, str]:
    """Size and SHA-256 (hex) of a file."""
    digest = hashlib.sha256()
    size = 0
    with path.open("rb") as handle:
        while block := handle.read(_READ):
            digest.update(block)
            size += len(block)
    return size, digest.hexdigest()


def partial_name(path: Path) -> Path:
    """Where a backup to ``path`` is written until it is complete."""
    return path.with_name(f".{path.name}.partial-{os.getpid()}-{secrets.token_hex(6)}")


def remove_stale_partials(path: Path) -> None:
    """Remove half-written backups to ``path`` left by killed processes."""
    from mailroom.backup.snapshot import remove_orphans

    pattern = re.compile(rf"^\.{re.escape(path.name)}\.partial-(\d+)-[0-9a-f]+$")
    remove_orphans(path.parent, pattern)


def write_backup(path: Path, key: BackupKey, manifest: dict[str, Any], data: Path) -> Written:
    """Seal ``manifest`` and the file ``data`` into a new backup at ``path`` (atomically)."""
    kind = manifest["store"]
    size, digest = file_digest(data)
    manifest = {**manifest, "files": [{"name": DATA_FILES[kind], "size": size, "sha256": digest}]}
    file_key = AESGCM.generate_key(bit_length=256)
    prefix = secrets.token_bytes(PREFIX)
    wrap_nonce = secrets.token_bytes(12)
    header = json.dumps(
        {
            "format": FORMAT,
            "cipher": "AES-256-GCM STREAM, 1 MiB chunks",
            "key_source": key.source,
            "key_id": key.key_id,
            "wrapped_key": _b64(
                wrap_nonce + AESGCM(key.key).encrypt(wrap_nonce, file_key, _WRAP_AD)
            ),
            "nonce_prefix": _b64(prefix),
        },
        sort_keys=True,
    ).encode()
    preamble = MAGIC + _LENGTH.pack(len(header)) + header
    partial = partial_name(path)
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as raw:
            out = _Hashing(raw)
            out.write(preamble)
            sealer = SealingWriter(out, file_key, prefix, preamble)  # type: ignore[arg-type]
            with tarfile.open(fileobj=sealer, mode="w|", format=tarfile.PAX_FORMAT) as tar:  # type: ignore[call-overload]
                body = json.dumps(manifest, indent=2, sort_keys=True).encode()
                tar.addfile(_member(MANIFEST, len(body)), io.BytesIO(body))
                with data.open("rb") as source:
                    tar.addfile(_member(DATA_FILES[kind], size), source)
            sealer.close()
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    _sync_directory(path.parent)
    return Written(path, out.size, out.digest.hexdigest(), manifest)


def _member(name: str, size: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mode = 0o600
    info.mtime = 0
    return info


def _sync_directory(directory: Path) -> None:
    """Make the rename durable (a crash after it must not bring the old name back)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@contextmanager
def _opened(path: Path, key: BackupKey) -> Iterator[OpeningReader]:
    """The plaintext stream of the backup at ``path``, after its header and key are checked."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise ConfigError(f"There is no backup file {path}.") from None
    except OSError as exc:
        raise ConfigError(f"The backup file {path} cannot be read ({exc.strerror}).") from None
    with handle:
        if handle.read(len(MAGIC)) != MAGIC:
            raise DamagedBackup(f"{path} is not a mailroom backup.")
        head = handle.read(_LENGTH.size)
        length = _LENGTH.unpack(head)[0] if len(head) == _LENGTH.size else -1
        header_bytes = handle.read(length) if 0 < length <= _MAX_HEADER else b""
        try:
            header = json.loads(header_bytes)
            if not isinstance(header, dict):
                raise ValueError("not an object")
            wrapped = base64.b64decode(header["wrapped_key"], validate=True)
            prefix = base64.b64decode(header["nonce_prefix"], validate=True)
            fmt, key_id, source = header["format"], header["key_id"], header["key_source"]
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise DamagedBackup(f"The header of the backup {path} is damaged.") from None
        if fmt != FORMAT:
            raise DamagedBackup(
                f"{path} is a backup of format {fmt}; this mailroom reads {FORMAT}."
            )
        if key_id != key.key_id:
            raise ConfigError(_wrong_key(path, source, key))
        try:
            file_key = AESGCM(key.key).decrypt(wrapped[:12], wrapped[12:], _WRAP_AD)
        except InvalidTag:
            raise DamagedBackup(f"The header of the backup {path} is damaged.") from None
        preamble = MAGIC + head + header_bytes
        yield OpeningReader(handle, file_key, prefix, preamble)


def _wrong_key(path: Path, source: str, key: BackupKey) -> str:
    if source == "master" and key.source == "master":
        fix = "a key derived from another master key; set the master key it was made with"
    elif source == "master":
        fix = "the key derived from the master key; leave out --key-file"
    elif key.source == "master":
        fix = "a backup key file; give that file with --key-file"
    else:
        fix = "another backup key file; give the one it was made with"
    return f"The backup {path} was made with {fix}."


def read_backup(
    path: Path, key: BackupKey, extract_to: Path | None = None
) -> tuple[dict[str, Any], dict[str, Path]]:
    """Decrypt and check the whole backup; its manifest and, with ``extract_to``, its files.

    Files are written to private temporary names in the directory ``extract_to``;
    they are removed again unless every chunk and every SHA-256 checked out.
    """
    from mailroom.backup.snapshot import temp_path

    manifest: dict[str, Any] | None = None
    expected: dict[str, dict[str, Any]] = {}
    written: dict[str, Path] = {}
    seen: set[str] = set()
    try:
        with _opened(path, key) as reader:
            with tarfile.open(fileobj=reader, mode="r|") as tar:  # type: ignore[call-overload]
                for member in tar:
                    stream = tar.extractfile(member) if member.isfile() else None
                    if stream is None:
                        raise DamagedBackup(f"The backup {path} holds an unexpected entry.")
                    if manifest is None:
                        manifest = _manifest(path, member.name, stream)
                        expected = {entry["name"]: entry for entry in manifest["files"]}
                        continue
                    entry = expected.get(member.name)
                    if entry is None or member.name in seen:
                        raise DamagedBackup(
                            f"The backup {path} holds a file its manifest does not name."
                        )
                    seen.add(member.name)
                    target = temp_path(extract_to) if extract_to is not None else None
                    if target is not None:
                        written[member.name] = target
                    _check_member(path, stream, entry, target)
            reader.drain()
    except tarfile.TarError:
        _remove(written)
        raise DamagedBackup(f"The backup {path} is damaged (its archive cannot be read).") from None
    except BaseException:
        _remove(written)
        raise
    if manifest is None or seen != set(expected):
        _remove(written)
        raise DamagedBackup(
            f"The backup {path} is incomplete (files named by its manifest are missing)."
        )
    return manifest, written


def _remove(files: dict[str, Path]) -> None:
    for file in files.values():
        file.unlink(missing_ok=True)


def _manifest(path: Path, name: str, stream: IO[bytes]) -> dict[str, Any]:
    if name != MANIFEST:
        raise DamagedBackup(f"The backup {path} does not start with its manifest.")
    try:
        manifest = json.loads(stream.read(_MAX_HEADER))
        files = manifest["files"]
        if not isinstance(files, list) or manifest["store"] not in DATA_FILES:
            raise ValueError("bad manifest")
        for entry in files:
            if entry["name"] not in DATA_FILES.values():
                raise ValueError("bad file")
    except (ValueError, KeyError, TypeError):
        raise DamagedBackup(f"The manifest of the backup {path} is damaged.") from None
    return dict(manifest)


def _check_member(
    path: Path, stream: IO[bytes], entry: dict[str, Any], target: Path | None
) -> None:
    digest = hashlib.sha256()
    size = 0
    out = None
    if target is not None:
        out = os.fdopen(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb")
    try:
        while block := stream.read(_READ):
            digest.update(block)
            size += len(block)
            if out is not None:
                out.write(block)
    finally:
        if out is not None:
            out.close()
    if size != entry["size"] or digest.hexdigest() != entry["sha256"]:
        raise DamagedBackup(
            f"The backup {path} is damaged: {entry['name']} does not match its manifest's SHA-256."
        )


def created_at() -> str:
    """Now, as the manifest writes it (UTC, ISO 8601)."""
    return datetime.now(UTC).isoformat(timespec="seconds")
