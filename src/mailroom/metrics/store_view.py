"""The store's and the queues' view, read when ``mailroom serve`` is scraped.

These figures are the same from every process (they live in the database and
in the queues' storage), so only the HTTP server reports them: per queue its
depth, the jobs scheduled for later and the age of the oldest waiting job;
accounts per status; outgoing submissions per lane and state. Each part that
cannot be read (Redis or the database down) is left out of that scrape and
says so in ``mailroom_collector_up{part}`` (0), so the scrape itself still
answers and an alert can name the part.

Cost per scrape: three cheap reads per queue, one ``GROUP BY`` over accounts
and one over submissions.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping

from huey import Huey
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from mailroom.metrics.jobs import queue_figures
from mailroom.store.engine import Store
from mailroom.store.models import Account

log = logging.getLogger(__name__)


class StoreView(Collector):
    """A collector over one store and its queues (made per application, asked per scrape)."""

    def __init__(self, store: Store, queues: Mapping[str, Huey]) -> None:
        self.store = store
        self.queues = queues

    def collect(self) -> Iterator[Metric]:
        """Every family of the view, and whether each part could be read."""
        up = GaugeMetricFamily(
            "mailroom_collector_up",
            "Whether a part of the store's view could be read.",
            None,
            ["part"],
        )
        for part, read in (
            ("queues", self._queues),
            ("accounts", self._accounts),
            ("outbound", self._outbound),
        ):
            try:
                families = list(read())
            except Exception as exc:  # one part down must not fail the whole scrape
                log.warning("Metrics: the %s could not be read (%s).", part, type(exc).__name__)
                up.add_metric([part], 0.0)
                continue
            up.add_metric([part], 1.0)
            yield from families
        yield up

    def _queues(self) -> Iterator[Metric]:
        depth = GaugeMetricFamily("mailroom_queue_depth", "Jobs waiting to run.", labels=["queue"])
        scheduled = GaugeMetricFamily(
            "mailroom_queue_scheduled", "Jobs scheduled for later.", labels=["queue"]
        )
        age = GaugeMetricFamily(
            "mailroom_queue_oldest_job_age_seconds",
            "How long the next job to run has been waiting (0 when none waits).",
            labels=["queue"],
        )
        for name, queue in self.queues.items():
            figures = queue_figures(queue)
            depth.add_metric([name], figures.depth)
            scheduled.add_metric([name], figures.scheduled)
            if figures.oldest_age is not None:
                age.add_metric([name], figures.oldest_age)
        yield from (depth, scheduled, age)

    def _accounts(self) -> Iterator[Metric]:
        accounts = GaugeMetricFamily("mailroom_accounts", "Accounts per status.", labels=["status"])
        with self.store.session() as session:
            rows = session.execute(select(Account.status, func.count()).group_by(Account.status))
            counts = {str(status): int(count) for status, count in rows}
        for status in ("active", "auth_error", "disconnected"):
            counts.setdefault(status, 0)
        for status, count in sorted(counts.items()):
            accounts.add_metric([status], count)
        yield accounts

    def _outbound(self) -> Iterator[Metric]:
        from mailroom.outbound.failures import lane_stats

        family = GaugeMetricFamily(
            "mailroom_outbound_submissions",
            "Outgoing submissions per lane and state (queued includes deferred).",
            labels=["lane", "state"],
        )
        with self.store.session() as session:
            stats = lane_stats(session)
        for lane, figures in sorted(stats.items()):
            for state, count in sorted(figures.items()):
                family.add_metric([lane, state], count)
        yield family
