"""Reading local mail sources: an mbox file, a Maildir (with Maildir++ folders)
or a directory of ``.eml`` files, autodetected.

Identity: a local message's provider id is the SHA-256 of its bytes, so a
second import of the same source finds every message already stored, and a
copy of the same message in two folders is one message with two labels.
Folder names become label paths: Maildir++ ``.Work.Invoices`` and the
sub-directory ``Work/Invoices`` of an .eml tree both become ``Work/Invoices``;
the top folder is the Inbox.
"""

from __future__ import annotations

import hashlib
import mailbox
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from mailroom.errors import SourceError


@dataclass(frozen=True, slots=True)
class LocalMessage:
    """One message read from a local source, or the reason it could not be read."""

    folder: tuple[str, ...]  # label path parts; () is the Inbox
    key: str  # where in the source it was (file name or mbox position)
    raw: bytes | None
    seen: bool
    mtime: datetime | None
    error: str | None = None
    flagged: bool = False

    @property
    def provider_id(self) -> str:
        """The content hash that identifies this message within an account."""
        return hashlib.sha256(self.raw or self.key.encode()).hexdigest()


class LocalSource:
    """A readable local source: its kind, size and messages."""

    kind = "unknown"

    def __init__(self, path: Path) -> None:
        self.path = path

    def count(self) -> int:
        """How many messages the source holds (for progress)."""
        raise NotImplementedError

    def messages(self) -> Iterator[LocalMessage]:
        """Every message, in a stable order."""
        raise NotImplementedError


def _mtime(path: Path) -> datetime | None:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)
    except OSError:
        return None


def _read(
    path: Path, folder: tuple[str, ...], key: str, seen: bool, flagged: bool = False
) -> LocalMessage:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        return LocalMessage(folder, key, None, seen, None, f"cannot read {path}: {exc.strerror}")
    return LocalMessage(folder, key, raw, seen, _mtime(path), flagged=flagged)


class MaildirSource(LocalSource):
    """A Maildir; ``.Name.Sub`` sub-folders (Maildir++) become labels ``Name/Sub``.

    Flags of messages in ``cur/``: ``S`` = read, ``F`` = starred.
    """

    kind = "maildir"

    def _folders(self) -> list[tuple[tuple[str, ...], Path]]:
        folders: list[tuple[tuple[str, ...], Path]] = [((), self.path)]
        for child in sorted(self.path.iterdir()):
            if child.name.startswith(".") and child.is_dir() and _is_maildir(child):
                parts = tuple(p for p in child.name[1:].split(".") if p)
                folders.append((parts, child))
        return folders

    def _files(self) -> Iterator[tuple[tuple[str, ...], Path, str]]:
        for folder, root in self._folders():
            for sub in ("cur", "new"):
                directory = root / sub
                try:
                    names = sorted(os.listdir(directory))
                except OSError:
                    continue
                for name in names:
                    if name.startswith("."):
                        continue
                    flags = name.rpartition(":2,")[2] if ":2," in name and sub == "cur" else ""
                    yield folder, directory / name, flags

    def count(self) -> int:
        return sum(1 for _ in self._files())

    def messages(self) -> Iterator[LocalMessage]:
        for folder, path, flags in self._files():
            key = path.name.partition(":")[0]
            yield _read(path, folder, key, "S" in flags, flagged="F" in flags)


class EmlDirectorySource(LocalSource):
    """A directory tree of ``.eml`` files; sub-directories become labels."""

    kind = "eml"

    def _files(self) -> list[Path]:
        return sorted(p for p in self.path.rglob("*.eml") if p.is_file())

    def count(self) -> int:
        return len(self._files())

    def messages(self) -> Iterator[LocalMessage]:
        for path in self._files():
            relative = path.relative_to(self.path)
            yield _read(path, tuple(relative.parent.parts), str(relative), False)


class MboxSource(LocalSource):
    """An mbox file; the Status header's ``R`` flag marks a message read."""

    kind = "mbox"

    def count(self) -> int:
        box = mailbox.mbox(self.path, create=False)
        try:
            return len(box)
        finally:
            box.close()

    def messages(self) -> Iterator[LocalMessage]:
        mtime = _mtime(self.path)
        box = mailbox.mbox(self.path, create=False)
        try:
            for position, key in enumerate(box.keys()):
                raw = box.get_bytes(key)
                head = raw.split(b"\n\n", 1)[0]
                seen = any(
                    line.lower().startswith(b"status:") and b"R" in line[7:]
                    for line in head.splitlines()
                )
                yield LocalMessage((), f"mbox:{position}", raw, seen, mtime)
        finally:
            box.close()


class SingleFileSource(LocalSource):
    """One message file (``.eml``)."""

    kind = "eml"

    def count(self) -> int:
        return 1

    def messages(self) -> Iterator[LocalMessage]:
        yield _read(self.path, (), self.path.name, False)


def _is_maildir(path: Path) -> bool:
    return (path / "cur").is_dir() and (path / "new").is_dir()


def _looks_like_mbox(path: Path) -> bool:
    with path.open("rb") as handle:
        return handle.read(5) == b"From "


def open_source(path: Path) -> LocalSource:
    """The local source at ``path``, autodetected; SourceError in plain words otherwise."""
    path = path.expanduser()
    if not path.exists():
        raise SourceError(
            f"{path} does not exist; give the path of an mbox file, a Maildir "
            "or a folder of .eml files."
        )
    if not os.access(path, os.R_OK):
        raise SourceError(f"{path} is not readable by this user; check its permissions.")
    if path.is_dir():
        if _is_maildir(path):
            return MaildirSource(path)
        if any(path.rglob("*.eml")):
            return EmlDirectorySource(path)
        raise SourceError(
            f"{path} is neither a Maildir (cur/ and new/) nor a folder of .eml files."
        )
    try:
        if _looks_like_mbox(path):
            return MboxSource(path)
    except OSError as exc:
        raise SourceError(f"{path} cannot be read ({exc.strerror}).") from None
    if path.suffix.lower() in (".eml", ".msg", ".txt"):
        return SingleFileSource(path)
    raise SourceError(
        f"{path} is not an mbox file (it does not start with 'From '), "
        "a Maildir or a folder of .eml files."
    )
