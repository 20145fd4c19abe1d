"""Which server process delivers push subscriptions: one at a time on PostgreSQL.

Several ``mailroom serve`` processes (on many machines) share a PostgreSQL
store; each runs a :class:`~mailroom.jmap.push_delivery.PushDelivery`, but only
the holder of a session advisory lock delivers, so a client gets every
PushVerification and StateChange once. The lock lives as long as the holder's
database connection: a process that dies or loses its connection lets another
take over at its next try. SQLite stores are one machine's and one ``serve``
process's, so there the lease is always held.
"""

from __future__ import annotations

import threading

from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError

from mailroom.store.engine import Store

_SPACE = 0x70757368  # "push": the advisory lock's first key
_KEY = 1
_TRY = text("SELECT pg_try_advisory_lock(:space, :key)")
_UNLOCK = text("SELECT pg_advisory_unlock(:space, :key)")


class DeliveryLease:
    """The right to deliver, held on one dedicated connection (PostgreSQL).

    :meth:`release` is final and safe against a :meth:`hold` still running in
    another thread (a delivery loop cancelled at shutdown while connecting): that
    hold gives up what it took, so no connection or lock outlives the lease.
    """

    def __init__(self, store: Store) -> None:
        self.store = store
        self._connection: Connection | None = None
        self._lock = threading.Lock()
        self._released = False

    def hold(self) -> bool:
        """Whether this process delivers now (taking the lease when it is free)."""
        if self.store.dialect != "postgresql":
            return True
        with self._lock:
            if self._released:
                return False
            if self._connection is not None:
                try:
                    self._connection.execute(text("SELECT 1"))
                    self._connection.rollback()
                    return True
                except DBAPIError:
                    self._drop()
        connection = self.store.engine.connect()  # outside the lock: it may wait for the pool
        try:
            taken = bool(connection.execute(_TRY, {"space": _SPACE, "key": _KEY}).scalar())
            connection.rollback()  # the lock is the session's: it outlives the transaction
        except DBAPIError:
            connection.invalidate()
            connection.close()
            return False
        if not taken:
            connection.close()
            return False
        with self._lock:
            if not self._released:
                self._connection = connection
                return True
        _unlock(connection)  # released meanwhile: this hold never counted
        return False

    def release(self) -> None:
        """Give the lease up for good (at shutdown) so another process takes over at once."""
        with self._lock:
            self._released = True
            connection, self._connection = self._connection, None
        if connection is not None:
            _unlock(connection)

    def _drop(self) -> None:
        assert self._connection is not None
        self._connection.invalidate()  # never back to the pool holding the lock
        self._connection.close()
        self._connection = None


def _unlock(connection: Connection) -> None:
    """Unlock and close a connection holding the lease (invalidated if it fails)."""
    try:
        connection.execute(_UNLOCK, {"space": _SPACE, "key": _KEY})
        connection.rollback()
    except DBAPIError:
        connection.invalidate()
    connection.close()
