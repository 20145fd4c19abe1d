"""Look-ahead for the importer: the next page is fetched and parsed while this one is stored.

Storing a page is database work in this process; fetching the next one is
network, server and response-reading work, and parsing it is CPU work. On a
connection kept open across pages (``mailroom sync --until-imported``, the
benchmark, a worker holding its connection) the importer hands the next page's
UIDs to :class:`LookAhead` after choosing the current one, and a parse worker
process fetches and parses that page on a connection of its own
(:mod:`.remote`), so this process only stores.

Invariants:

* The result is only a cache: the next ``import_page`` chooses its page from the
  marks as always and takes the prefetched data only if folder, UIDVALIDITY and
  UIDs are exactly the same; otherwise it is dropped (a retry, a failure, another
  worker moved the marks). Nothing is stored from here.
* A failure in the worker (a broken connection, a refused FETCH, a changed
  UIDVALIDITY) only costs the look-ahead: the page is fetched again in the
  foreground, where the ordinary failure rules apply.
* Without a worker (a small import, a connection that cannot be re-opened
  elsewhere, workers still starting) nothing is fetched ahead.
* A pool whose worker died (killed, out of memory) is replaced by a new one, up
  to ``MAX_RESTARTS`` times per connection: without it the rest of a long import
  would fetch and parse in the storing process, at about half the speed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from concurrent.futures import Future

from mailroom.mime.pool import ParsePool
from mailroom.providers.imap.connection import ImapConnection
from mailroom.providers.imap.remote import FetchedPage, close_connections, fetch_page
from mailroom.providers.imap.state import PAGE_SIZE

__all__ = ["FetchedPage", "LookAhead"]

log = logging.getLogger(__name__)

_KEY = "import.lookahead"
_PageKey = tuple[int, int, tuple[int, ...]]  # folder id, UIDVALIDITY, UIDs
_CLOSE_WAIT = 5.0  # seconds for the worker to log out before it is stopped
MAX_RESTARTS = 3  # new pools per connection after a worker died


class LookAhead:
    """The look-ahead attached to one connection (see the module docstring)."""

    def __init__(self, conn: ImapConnection, expected_messages: int) -> None:
        self.conn = conn
        self._expected = expected_messages if conn.relogin else 0
        self.pool = self._new_pool()
        self.restarts = 0
        self._served = False  # a worker of this pool has taken a page
        self._ahead: tuple[_PageKey, Future[FetchedPage]] | None = None
        self.page_size = PAGE_SIZE  # of the next page; the importer grows it page by page
        self.average_bytes: float | None = None  # per message, of the last page seen
        conn.on_close.append(self.close)

    def _new_pool(self) -> ParsePool:
        workers = max(1, (os.cpu_count() or 1) - 1)
        return ParsePool(self._expected, workers=workers, preload=[__name__])

    @classmethod
    def of(cls, conn: ImapConnection, expected_messages: int) -> LookAhead:
        """The connection's look-ahead, created on first use."""
        existing = conn.attached.get(_KEY)
        if isinstance(existing, LookAhead):
            return existing
        created = cls(conn, expected_messages)
        conn.attached[_KEY] = created
        return created

    def start(self, folder_id: int, path: str, uidvalidity: int, uids: list[int]) -> None:
        """Have a worker fetch and parse ``uids`` of folder ``path`` (if one is up)."""
        self._ahead = None
        if self.conn.relogin is None:
            return
        future = self.pool.call(
            fetch_page, self.conn.relogin, folder_id, path, uidvalidity, list(uids)
        )
        if future is None and self._served and self.restarts < MAX_RESTARTS:
            # Its workers were up and now refuse work: the pool broke. A new one starts
            # (this page is fetched in the foreground while its workers come up).
            log.warning("The look-ahead's worker stopped; starting a new one")
            self.pool.__exit__(None, None, None)
            self.pool, self._served = self._new_pool(), False
            self.restarts += 1
        if future is not None:
            self._served = True
            self._ahead = ((folder_id, uidvalidity, tuple(uids)), future)

    def observe(self, bodies: Iterable[bytes]) -> None:
        """Note the average message size of a page (the importer sizes the next pages by it)."""
        sizes = [len(body) for body in bodies]
        if sizes:
            self.average_bytes = sum(sizes) / len(sizes)

    def take(self, folder_id: int, uidvalidity: int, uids: list[int]) -> FetchedPage | None:
        """The prefetched page if it is exactly this one (and fetched without error)."""
        ahead, self._ahead = self._ahead, None
        if ahead is None or ahead[0] != (folder_id, uidvalidity, tuple(uids)):
            return None  # not the page asked for: dropped without waiting for it
        try:
            return ahead[1].result()
        except Exception as exc:  # only the cache is lost: the page is fetched in the foreground
            log.info("Fetching ahead failed (%s); fetching the page now", exc)
            return None

    def close(self) -> None:
        """Drop what is in flight, ask a worker to log out (best effort), stop the workers.

        A worker that did not get the request is stopped with its connection open;
        the server sees the socket close.
        """
        self._ahead = None
        logout = self.pool.call(close_connections)
        if logout is not None:
            try:
                logout.result(timeout=_CLOSE_WAIT)
            except Exception:  # noqa: BLE001 - the worker is stopped next anyway
                log.debug("A look-ahead worker did not log out in time")
        self.pool.__exit__(None, None, None)
        self.conn.attached.pop(_KEY, None)
