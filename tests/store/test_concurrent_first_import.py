"""Two first imports of one new account at once: both finish, every folder and message once."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import func, select

from mailroom.providers.local.importer import ImportSummary, import_path
from mailroom.store.engine import Store
from mailroom.store.models import Folder, LabelBinding, Message
from tests.factories import make_message

FOLDERS = ["", ".Work", ".Work.Invoices", ".Lists", ".Family", ".Travel"]


def _maildir(root: Path) -> Path:
    for n, folder in enumerate(FOLDERS * 4):
        base = root / folder if folder else root
        for sub in ("cur", "new", "tmp"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        (base / "cur" / f"{n:04d}:2,S").write_bytes(make_message(f"m{n}@x", subject=f"M {n}"))
    return root


def test_two_first_imports_of_a_new_account_at_once(store: Store, tmp_path: Path) -> None:
    """Two threads importing into the same new account at once both succeed (no IntegrityError)."""
    root = _maildir(tmp_path / "mail")
    start = threading.Barrier(2)
    summaries: list[ImportSummary] = []
    errors: list[BaseException] = []

    def run() -> None:
        start.wait()
        try:
            summaries.append(import_path(store, root, owner="me", account="new", batch_size=1))
        except BaseException as exc:  # the test reports it below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert sum(s.imported for s in summaries) == len(FOLDERS) * 4
    with store.session() as session:
        assert session.scalar(select(func.count()).select_from(Message)) == len(FOLDERS) * 4
        paths = list(session.scalars(select(Folder.path)))
        assert sorted(paths) == sorted(set(paths)) and len(paths) == len(FOLDERS)
        assert session.scalar(select(func.count()).select_from(LabelBinding)) == len(FOLDERS)
