"""Look-ahead for the importer: the next page is fetched and parsed while this one is stored.

Storing a page is database work; fetching the next one is network and server work,
and parsing it is CPU work that :class:`mailroom.mime.pool.ParsePool` can do in
other processes. On a connection kept open across pages (``mailroom sync
--until-imported``, the benchmark, a worker holding its connection) the importer
hands the next page's UIDs to :class:`LookAhead` after choosing the current one; a
background thread fetches envelopes and bodies and submits the bodies for parsing.

Invariants:

* The result is only a cache: the next ``import_page`` chooses its page from the
  marks as always and takes the prefetched data only if folder, UIDVALIDITY and
  UIDs are exactly the same; otherwise it is dropped (a retry, a failure, another
  worker moved the marks). Nothing is stored from here.
* One thread at a time talks on the connection: every command waits for the
  background fetch (:meth:`ImapConnection.settle`).
* A failure in the background (a broken connection, a refused FETCH) is kept and
  the page is fetched again in the foreground, where the ordinary failure rules
  apply.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime

from mailroom.mime import ParsedMessage
from mailroom.mime.pool import ParsePool
from mailroom.providers.imap.connection import ImapConnection
from mailroom.providers.imap.fetcher import Envelope, fetch_envelopes_and_bodies

__all__ = ["LookAhead", "Prefetched"]

log = logging.getLogger(__name__)

_KEY = "import.lookahead"


@dataclass
class Prefetched:
    """One page fetched (and being parsed) ahead of time."""

    folder_id: int
    uidvalidity: int
    uids: tuple[int, ...]
    envelopes: dict[int, Envelope] = field(default_factory=dict)
    bodies: dict[int, bytes] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)
    error: BaseException | None = None
    _parse: Future[list[ParsedMessage]] | None = None
    _parse_items: list[tuple[int, bytes, datetime | None]] = field(default_factory=list)

    def parsed(self) -> dict[int, ParsedMessage]:
        """UID → parsed message (parsing inline if a worker failed)."""
        if self._parse is None:
            return {}
        work = [(raw, when) for _uid, raw, when in self._parse_items]
        results = ParsePool.result(self._parse, work)
        return {
            uid: parsed
            for (uid, _raw, _when), parsed in zip(self._parse_items, results, strict=True)
        }


class LookAhead:
    """The look-ahead attached to one connection (see the module docstring)."""

    def __init__(self, conn: ImapConnection, expected_messages: int) -> None:
        self.conn = conn
        self.pool = ParsePool(expected_messages)
        self.slot: Prefetched | None = None
        conn.on_close.append(self.close)

    @classmethod
    def of(cls, conn: ImapConnection, expected_messages: int) -> LookAhead:
        """The connection's look-ahead, created on first use."""
        existing = conn.attached.get(_KEY)
        if isinstance(existing, LookAhead):
            return existing
        created = cls(conn, expected_messages)
        conn.attached[_KEY] = created
        return created

    def start(self, folder_id: int, uidvalidity: int, uids: list[int]) -> None:
        """Fetch (and start parsing) ``uids`` of the selected folder in the background."""
        self.conn.settle()
        slot = Prefetched(folder_id, uidvalidity, tuple(uids))
        self.slot = slot

        def run() -> None:
            try:
                slot.envelopes, slot.bodies, slot.failed = fetch_envelopes_and_bodies(
                    self.conn, list(uids)
                )
                slot._parse_items = [
                    (uid, raw, slot.envelopes[uid].internaldate)
                    for uid, raw in slot.bodies.items()
                    if uid in slot.envelopes
                ]
                slot._parse = self.pool.submit([(raw, when) for _u, raw, when in slot._parse_items])
            except BaseException as exc:  # kept; the page is fetched again in the foreground
                slot.error = exc

        thread = threading.Thread(target=run, name="imap-lookahead", daemon=True)
        self.conn.background = thread
        thread.start()

    def take(self, folder_id: int, uidvalidity: int, uids: list[int]) -> Prefetched | None:
        """The prefetched page if it is exactly this one (and fetched without error)."""
        self.conn.settle()
        slot, self.slot = self.slot, None
        if slot is None or slot.error is not None:
            return None
        if (slot.folder_id, slot.uidvalidity, slot.uids) != (folder_id, uidvalidity, tuple(uids)):
            return None
        return slot

    def close(self) -> None:
        """Drop what is in flight and stop the parse workers."""
        self.conn.settle()
        self.slot = None
        self.pool.__exit__(None, None, None)
        self.conn.attached.pop(_KEY, None)
