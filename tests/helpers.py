"""Small test helpers that go through the public services."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.engine import make_url

from mailroom.ingest import BatchResult, IncomingMessage, store_batch
from mailroom.labels.resolver import ensure_system_labels
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.store.engine import Store
from mailroom.store.models import Message
from tests.conftest import service_missing

if TYPE_CHECKING:
    from huey import Huey


def make_account(store: Store, owner: str = "me", name: str = "test") -> tuple[int, int, int]:
    """Create (user, account) and the system labels; returns (user_id, account_id, inbox_id)."""
    with store.session() as session:
        user = get_or_create_user(session, owner)
        account = get_or_create_account(session, user, name, "local")
        roles = ensure_system_labels(session, user.id)
        return user.id, account.id, roles["inbox"]


def ingest(
    store: Store,
    account: tuple[int, int, int],
    raws: Sequence[tuple[str, bytes]],
) -> BatchResult:
    """Store (provider id, raw) pairs as one batch in the inbox."""
    user_id, account_id, inbox = account
    with store.session() as session:
        items = [IncomingMessage(pid, raw, label_ids=[inbox]) for pid, raw in raws]
        return store_batch(session, account_id, user_id, items)


def thread_of(store: Store, message_id_header: str) -> int | None:
    """The thread id of the message with this Message-ID."""
    with store.session() as session:
        return session.scalar(
            select(Message.thread_id).where(Message.message_id_header == message_id_header)
        )


def thread_of_provider(store: Store, owner: int, provider_id: str) -> int:
    """The thread of ``owner``'s message with this provider id (it must have one).

    For sealed mail, whose Message-ID is stored hashed (``thread_of`` cannot find it).
    """
    with store.session() as session:
        found = session.scalar(
            select(Message.thread_id).where(
                Message.user_id == owner, Message.provider_id == provider_id
            )
        )
    assert found is not None
    return found


def write_maildir(root: Path, messages: dict[str, bytes], folder: str = "") -> Path:
    """Write messages into a Maildir (optionally a Maildir++ sub-folder)."""
    base = root / folder if folder else root
    for sub in ("cur", "new", "tmp"):
        (base / sub).mkdir(parents=True, exist_ok=True)
        (root / sub).mkdir(parents=True, exist_ok=True)
    for name, raw in messages.items():
        (base / "cur" / f"{name}:2,S").write_bytes(raw)
    return root


def drain(queue: Huey) -> int:
    """Run queued jobs one by one until the queue is empty; returns how many ran."""
    ran = 0
    while (task := queue.dequeue()) is not None:
        queue.execute(task)
        ran += 1
    return ran


def pg_dump_data(store: Store, *tables: str) -> bytes:
    """``pg_dump --data-only`` of the store's database (only ``tables``, when named).

    What a PostgreSQL backup would hold: file checks grep it for what must be gone.
    """
    if shutil.which("pg_dump") is None:
        service_missing("pg_dump", "not installed; scripts/test-services.sh installs it")
    url = make_url(store.engine.url)
    env = {**os.environ, "PGPASSWORD": url.password or ""}
    args = ["pg_dump", "-h", url.host or "127.0.0.1", "-p", str(url.port or 5432)]
    args += ["-U", url.username or "postgres", "--data-only"]
    for table in tables:
        args += ["-t", table]
    args.append(url.database or "")
    return subprocess.run(args, env=env, check=True, capture_output=True, timeout=60).stdout


def store_bytes(store: Store) -> bytes:
    """Every byte the store keeps: the SQLite file and its write-ahead log, or a pg_dump.

    What a copy of the store would hold: file checks grep it for what must not be there.
    """
    if store.dialect == "sqlite":
        with store.engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        path = Path(make_url(store.engine.url).database or "")
        wal = path.with_name(path.name + "-wal")
        return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    return pg_dump_data(store)
