"""The push delivery lease: one delivering process at a time on PostgreSQL, always on SQLite."""

from __future__ import annotations

import threading

from sqlalchemy import create_engine, text

from mailroom.jmap.push_lease import DeliveryLease
from mailroom.store.engine import Store


def test_one_holder_at_a_time_and_release_hands_over(store: Store) -> None:
    """A second process waits while the first holds; a release hands the lease over."""
    first, second = DeliveryLease(store), DeliveryLease(store)
    try:
        assert first.hold() and first.hold()  # holding again is still holding
        if store.dialect == "postgresql":
            assert not second.hold()
            first.release()
            assert second.hold()
            assert not first.hold()
        else:
            assert second.hold()  # one machine, one serve process
    finally:
        first.release()
        second.release()


def test_a_holder_that_loses_its_connection_loses_the_lease(store: Store) -> None:
    """When the holder's connection dies, another process takes over; the old one notices."""
    if store.dialect != "postgresql":
        return
    first, second = DeliveryLease(store), DeliveryLease(store)
    try:
        assert first.hold()
        with store.session() as session:
            # Only this database's holder (other test runs share the server), and
            # waiting until it has ended: the lock is free only then.
            session.execute(
                text(
                    "SELECT pg_terminate_backend(pid, 60000) FROM pg_locks "
                    "WHERE locktype = 'advisory' AND classid = :space AND objid = 1 "
                    "AND database = (SELECT oid FROM pg_database "
                    "WHERE datname = current_database())"
                ),
                {"space": 0x70757368},
            )
        assert second.hold()
        assert not first.hold()
    finally:
        first.release()
        second.release()


def test_a_release_during_a_hold_leaves_no_connection_out(store: Store) -> None:
    """Shutdown releases while the delivery loop's hold is still connecting: the hold gives up.

    The lease's store has a pool of one connection, taken by the test, so the
    hold waits inside ``connect`` until the release has run. Whichever runs
    first, the lease ends with no connection out and another process takes it.
    """
    if store.dialect != "postgresql":
        return
    small = Store(create_engine(store.engine.url, pool_size=1, max_overflow=0))
    try:
        lease = DeliveryLease(small)
        taken = small.engine.connect()
        held: list[bool] = []
        holder = threading.Thread(target=lambda: held.append(lease.hold()))
        try:
            holder.start()
            lease.release()
        finally:
            taken.close()
        holder.join(timeout=60)
        assert held == [False]
        assert small.engine.pool.checkedout() == 0
        other = DeliveryLease(store)
        try:
            assert other.hold()
        finally:
            other.release()
    finally:
        small.dispose()
