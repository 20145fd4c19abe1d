"""The provider contract against local files: a Maildir (with a Maildir++ folder)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import ClassVar

import pytest

from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.store.engine import Store
from tests.factories import make_message
from tests.providers.contract import Harness, ProviderContract

_names = itertools.count(1)


class LocalHarness(Harness):
    """Writes and renames Maildir files, as a mail program on the same machine would."""

    provider = "local"
    lacks: ClassVar[dict[str, str]] = {
        "propagation": "a local source is only read; nothing is carried back to its files",
        "auth": "a local source has no credentials",
        "unreachable": "a local source is a path, not a server",
        "removal": "a re-import adds places; a file that left a folder is not mirrored out",
        "folders": "a local source is only read; a label's folder is not written into its files",
    }

    def __init__(self, store: Store, account_id: int, root: Path) -> None:
        super().__init__(store, None, account_id)
        self.root = root
        self.files: dict[str, Path] = {}

    def _dir(self, folder: str) -> Path:
        base = self.root if folder == "INBOX" else self.root / f".{folder}"
        for sub in ("cur", "new", "tmp"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        return base / "cur"

    def put(self, key: str, folder: str = "INBOX") -> None:
        path = self._dir(folder) / f"{next(_names)}.{key}.mailroom:2,"
        path.write_bytes(make_message(f"{key}@x", subject=key))
        self.files[key] = path

    def move(self, key: str, folder: str) -> None:
        path = self.files[key]
        self.files[key] = path.rename(self._dir(folder) / path.name)

    def mark_seen(self, key: str) -> None:
        path = self.files[key]
        self.files[key] = path.rename(path.with_name(path.name + "S"))

    def provider_flagged(self, key: str) -> bool:
        return "F" in self.files[key].name.rpartition(":2,")[2]


@pytest.fixture
def harness(store: Store, tmp_path: Path) -> LocalHarness:
    """An empty Maildir and a local account reading it."""
    root = tmp_path / "maildir"
    for sub in ("cur", "new", "tmp"):
        (root / sub).mkdir(parents=True)
    with store.session() as session:
        user = get_or_create_user(session, "me")
        account = get_or_create_account(session, user, "local", "local", {"path": str(root)})
        account_id = account.id
    return LocalHarness(store, account_id, root)


class TestLocalContract(ProviderContract):
    """Local files hold to the contract, except what a read-only source cannot do."""
