"""Importing a local source into an account, batch by batch.

Each batch is one transaction, so an import killed at any point loses
nothing already committed and a rerun stores exactly what is missing
(identity is the content hash; the insert is idempotent).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from mailroom.crypto.blind_index import token_keys
from mailroom.crypto.message_fields import remembering_opened
from mailroom.crypto.seal_lane import sealing_lane
from mailroom.crypto.sealing import sealing_cipher
from mailroom.ingest import IncomingMessage, Location, commit_batch
from mailroom.ingest.collector import fewer_collections
from mailroom.labels.resolver import bind, ensure_system_labels, resolve_path
from mailroom.mime import ParsedMessage
from mailroom.mime.pool import ParsePool
from mailroom.owners import get_or_create_account, get_or_create_user
from mailroom.providers.local.source import LocalMessage, LocalSource, open_source
from mailroom.store.bulk import insert_or_get
from mailroom.store.checkpoints import background_checkpoints
from mailroom.store.engine import Store
from mailroom.store.models import Folder, utcnow

log = logging.getLogger(__name__)

_LANE = ["mailroom.crypto.seal_lane"]  # what the sealing helper imports before it starts
# Messages per transaction: a batch's fixed part (threading look-ups, bookkeeping, the
# commit) is paid once per batch; at 400 instead of 200 a sealed import of the benchmark
# corpus took a tenth less time (bench/RESULTS.md), as the IMAP import's pages had.
BATCH_SIZE = 400
BATCH_BYTES = 32 * 1024 * 1024  # ... and at most about this much mail (large messages)
FIRST_BATCH = 25  # batches grow from this to BATCH_SIZE (see _batches)
LOOK_AHEAD = 3  # batches being parsed while one is stored


@dataclass
class ImportSummary:
    """What an import did, for the one-line summary."""

    source_kind: str
    total: int = 0
    imported: int = 0
    duplicates: int = 0
    repaired: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)

    def line(self) -> str:
        """The one-line summary printed at the end of an import."""
        text = (
            f"{self.imported} imported, {self.duplicates} already stored, "
            f"{self.repaired} repaired, {len(self.failed)} failed"
        )
        if self.failed:
            key, reason = self.failed[0]
            text += f" (first failure: {key}: {reason})"
        return text


def _batches(
    messages: Iterator[LocalMessage], size: int, max_bytes: int = BATCH_BYTES
) -> Iterator[list[LocalMessage]]:
    """Chunks of ``size`` messages, the first ones smaller (25, 50, 100, ...).

    Nothing can be stored before the first batch is parsed, and the parse
    workers are still starting then: a small first batch, parsed in this
    process, gets storing going at once. A chunk ends early once it holds
    ``max_bytes`` of mail: a few batches are parsed ahead, so a folder of large
    messages must not hold hundreds of them in memory at once.
    """
    step = max(1, min(size, FIRST_BATCH))
    chunk: list[LocalMessage] = []
    held = 0
    for message in messages:
        chunk.append(message)
        held += len(message.raw or b"")
        if len(chunk) >= step or held >= max_bytes:
            yield chunk
            chunk, held = [], 0
            step = min(size, step * 2)
    if chunk:
        yield chunk


def import_path(
    store: Store,
    path: Path,
    *,
    owner: str = "me",
    account: str = "local",
    batch_size: int = BATCH_SIZE,
    progress: Callable[[int], None] | None = None,
    source: LocalSource | None = None,
) -> ImportSummary:
    """Import every message of the local source at ``path``; idempotent."""
    source = source or open_source(path)
    summary = ImportSummary(source_kind=source.kind, total=source.count())
    with store.session() as session:
        user = get_or_create_user(session, owner)
        acct = get_or_create_account(
            session, user, account, "local", {"path": str(path.expanduser().resolve())}
        )
        starred = ensure_system_labels(session, user.id)["starred"]
        user_id, account_id = user.id, acct.id
        # Sealing: the workers make the blind index entries too (the writer is the busy process).
        cipher = sealing_cipher(session)
        tokens = token_keys(cipher, user_id) if cipher is not None else None
    folders: dict[tuple[str, ...], tuple[int, int]] = {}

    def save(chunk: list[LocalMessage], parsed: list[ParsedMessage]) -> None:
        readable = [message for message in chunk if message.raw is not None]

        def build(session: Session) -> list[IncomingMessage]:
            # In the batch's transaction: a folder first seen here is created with it.
            items: list[IncomingMessage] = []
            for message, parsed_message in zip(readable, parsed, strict=True):
                if message.folder not in folders:
                    folders[message.folder] = _folder(session, account_id, user_id, message.folder)
                folder_id, label_id = folders[message.folder]
                digest = message.provider_id  # the SHA-256 of the bytes (local.source)
                items.append(
                    IncomingMessage(
                        provider_id=digest,
                        raw=message.raw,
                        raw_sha256=digest,
                        label_ids=[label_id, starred] if message.flagged else [label_id],
                        locations=[Location(folder_id, provider_ref=message.key)],
                        fallback_time=message.mtime,
                        seen=message.seen,
                        parsed=parsed_message,
                    )
                )
            return items

        result = commit_batch(store, account_id, user_id, build)
        summary.imported += len(result.created_ids)
        summary.duplicates += len(result.duplicate_ids)
        summary.repaired += result.repaired
        summary.failed.extend(result.failed)
        if progress:
            progress(len(chunk))

    # Sealing: a second helper seals each batch's values once their rows are inserted, while
    # the writer goes on (crypto.seal_lane); its own process, so it never waits behind parsing.
    # It yields the CPU to the writer as the parse workers do: it runs batches ahead of when
    # the writer needs them, and at the writer's priority it took the writer's core more often
    # (0.6 s of waiting for a core per 6,000 messages) than the writer then waited for it.
    # Sealed values opened again batch after batch (threading reads recent mail) open once.
    with (
        fewer_collections(),
        ParsePool(summary.total) as pool,
        ParsePool(summary.total if tokens else 0, workers=1, warm=_LANE, yielding=True) as lane,
        sealing_lane(lane),
        remembering_opened(),
        background_checkpoints(store),
    ):
        ahead: deque[tuple[list[LocalMessage], list[tuple[bytes, datetime | None]], Any]] = deque()
        for chunk in _batches(source.messages(), batch_size, BATCH_BYTES):
            for message in chunk:
                if message.raw is None:
                    summary.failed.append((message.key, message.error or "unreadable"))
            work = [(m.raw, m.mtime) for m in chunk if m.raw is not None]
            ahead.append((chunk, work, pool.submit(work, tokens)))
            if len(ahead) > LOOK_AHEAD:
                done_chunk, done_work, future = ahead.popleft()
                save(done_chunk, pool.result(future, done_work))
        while ahead:
            done_chunk, done_work, future = ahead.popleft()
            save(done_chunk, pool.result(future, done_work))
    return summary


def _folder(
    session: Session, account_id: int, user_id: int, parts: tuple[str, ...]
) -> tuple[int, int]:
    """The folder row and label of a local folder, created on first use."""

    path = "/".join(parts) or "INBOX"
    label = resolve_path(session, user_id, list(parts) or ["INBOX"])
    # Insert-or-get: a second import of the same new account may create it at the same time.
    folder_id, _ = insert_or_get(
        session,
        Folder,
        {
            "account_id": account_id,
            "path": path,
            "delimiter": "/",
            "label_id": label.id,
            "state": {},
            "created_at": utcnow(),
        },
        ("account_id", "path"),
    )
    bind(session, label.id, account_id, path)
    return folder_id, label.id
