"""File modes of the data dir: the directory is 0700 and every file in it 0600.

The data dir holds all mail, the password hashes and the queues, so no other
local user may read it, whatever the umask. ``private_dir`` creates the
directory 0700, and tightens an existing one that is group- or
world-accessible with one log line. ``private_file`` creates a file 0600
before SQLite (or huey) opens it, and tightens an existing one; SQLite
creates its ``-wal`` and ``-shm`` files with the mode of the database file
(``findCreateFileMode`` in its unix VFS), so those follow without a umask
change (the umask is process-wide and would race with other threads).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from mailroom.errors import StoreError

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) as 0700, or tighten it to 0700 if others can enter it."""
    try:
        if not path.is_dir():
            # mkdir applies the umask, so the mode is set again below.
            path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
            os.chmod(path, DIR_MODE)
            return path
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            os.chmod(path, mode & ~0o077 | 0o700)
            log.warning(
                "Data directory %s was readable by other users (mode %04o); tightened to %04o.",
                path,
                mode,
                DIR_MODE,
            )
    except OSError as exc:
        raise StoreError(
            f"Cannot create the data directory {path} ({exc.strerror}); "
            "choose another with MAILROOM_DATA_DIR or --data-dir."
        ) from None
    return path


def private_file(path: Path) -> Path:
    """Create ``path`` empty as 0600 if missing; tighten it and its SQLite side files to 0600."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE)
        os.close(fd)
        for candidate in (path, *(path.with_name(path.name + s) for s in SQLITE_SIDE_FILES)):
            try:
                mode = stat.S_IMODE(candidate.stat().st_mode)
            except FileNotFoundError:
                continue
            if mode & 0o077:
                os.chmod(candidate, mode & ~0o077)
    except OSError as exc:
        raise StoreError(f"Cannot create {path} ({exc.strerror}).") from None
    return path
