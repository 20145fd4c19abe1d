"""The supervisor's figures: watches held, lease renewals and losses, reconnects."""

from __future__ import annotations

from prometheus_client import REGISTRY

from mailroom.jobs.leases import LocalLeases
from mailroom.metrics import catalogue
from mailroom.providers.base import TransientError
from mailroom.store.engine import Store
from tests.jobs.test_supervisor import Clock, Harness, _accounts


def _sample(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def test_renewals_losses_reconnects_and_watches_move(store: Store) -> None:
    """A renewal, a watch that drops, and a lease taken by another each count once."""
    first, second = _accounts(store, 2)
    clock = Clock()
    leases = LocalLeases(clock)
    harness = Harness(store, leases)
    catalogue.watches_from(lambda: len(harness.supervisor.watching()))
    renewals, losses = (
        _sample("mailroom_lease_renewals_total"),
        _sample("mailroom_lease_losses_total"),
    )
    reconnects = _sample("mailroom_watch_reconnects_total")
    harness.supervisor.tick(clock.now)
    assert _sample("mailroom_watches") == 2
    clock.now += 31  # past ttl/3: both leases are renewed
    harness.supervisor.tick(clock.now)
    assert _sample("mailroom_lease_renewals_total") == renewals + 2
    harness.fail(first, TransientError("connection reset"))
    harness.supervisor.tick(clock.now)
    assert _sample("mailroom_watch_reconnects_total") == reconnects + 1
    assert _sample("mailroom_watches") == 1
    clock.now += 100  # renewals missed: the leases ran out and another process takes one
    assert leases.acquire(f"watch:{second}", 90) is not None
    harness.supervisor.tick(clock.now)
    assert _sample("mailroom_lease_losses_total") >= losses + 1
    harness.supervisor.stop()
    assert _sample("mailroom_watches") == 0
