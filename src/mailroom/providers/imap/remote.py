"""Fetching and parsing a page in a parse worker process, on a connection of its own.

The importing process is busy storing; reading IMAP responses and parsing mail
would compete with it for its core (and its interpreter lock). So the
importer's look-ahead (:mod:`.prefetch`) asks a worker of its
:class:`~mailroom.mime.pool.ParsePool` to log in with the same credentials
(:class:`~.connection.Relogin`), keep that connection open across pages,
fetch the next page's envelopes and bodies and parse them. What comes back is
only a cache for the importer: it checks folder, UIDVALIDITY and UIDs before
using it, and any failure here just means the page is fetched in the foreground.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

from mailroom.ingest.collector import fewer_collections
from mailroom.mime import ParsedMessage
from mailroom.mime.pool import parse_all
from mailroom.providers.imap.connection import ImapConnection, Relogin
from mailroom.providers.imap.fetcher import Envelope, fetch_envelopes_and_bodies

__all__ = ["FetchedPage", "close_connections", "fetch_page"]

# One connection per account and worker process, kept across pages.
_connections: dict[Relogin, ImapConnection] = {}


@dataclass
class FetchedPage:
    """One page of a folder, fetched (and parsed, when a worker did it) ahead of storing."""

    folder_id: int
    uidvalidity: int
    uids: tuple[int, ...]
    envelopes: dict[int, Envelope] = field(default_factory=dict)
    bodies: dict[int, bytes] = field(default_factory=dict)
    failed: dict[int, str] = field(default_factory=dict)
    parsed: dict[int, ParsedMessage] = field(default_factory=dict)


class RemoteFetchError(Exception):
    """A fetch in the worker failed (carried back as text: it need not pickle otherwise)."""


def _connection(relogin: Relogin) -> ImapConnection:
    conn = _connections.get(relogin)
    if conn is None or conn.closed:
        conn = relogin.connect()
        _connections[relogin] = conn
    return conn


def fetch_page(
    relogin: Relogin, folder_id: int, path: str, uidvalidity: int, uids: list[int]
) -> FetchedPage:
    """Fetch and parse ``uids`` of folder ``path``; runs in a worker process."""
    try:
        conn = _connection(relogin)
        status = conn.selected_status if conn.selected == path else None
        if status is None:
            status = conn.select(path, readonly=True)
        if status.uidvalidity != uidvalidity:
            raise RemoteFetchError(f"the UIDVALIDITY of {path} changed")
        page = FetchedPage(folder_id, uidvalidity, tuple(uids))
        with fewer_collections():  # like the importing process: parsing makes few cycles
            page.envelopes, page.bodies, page.failed = fetch_envelopes_and_bodies(conn, uids)
            wanted = [uid for uid in page.bodies if uid in page.envelopes]
            work = [(page.bodies[uid], page.envelopes[uid].internaldate) for uid in wanted]
            page.parsed = dict(zip(wanted, parse_all(work), strict=True))
        return page
    except Exception as exc:
        dropped = _connections.pop(relogin, None)
        if dropped is not None:
            with contextlib.suppress(Exception):
                dropped.close()
        if isinstance(exc, RemoteFetchError):
            raise
        raise RemoteFetchError(f"{type(exc).__name__}: {exc}") from None


def close_connections() -> bool:
    """Log out of every connection this worker holds."""
    while _connections:
        _relogin, conn = _connections.popitem()
        with contextlib.suppress(Exception):
            conn.close()
    return True
