"""``mailroom worker`` and ``mailroom supervisor``: the engine's processes at scale.

One machine: ``mailroom serve`` runs everything. Many machines (PostgreSQL +
Redis): any number of ``mailroom worker --queues ...`` and ``mailroom
supervisor`` processes, see docs/operations.md.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

import click

from mailroom.cli.context import AppContext, pass_app, plain_errors
from mailroom.jobs.queues import QUEUES, parse_queue_list

if TYPE_CHECKING:
    from mailroom.metrics.server import MetricsServer


def _stop_on_signals(stop: Callable[[], None]) -> None:
    def handler(signum: int, _frame: FrameType | None) -> None:
        click.echo(f"Received {signal.Signals(signum).name}; shutting down cleanly.", err=True)
        stop()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _serve_metrics(app: AppContext, listen: str | None) -> MetricsServer | None:
    """This process's /metrics endpoint when one is asked for (flag or setting), else None."""
    from mailroom.metrics.access import ScrapeAccess
    from mailroom.metrics.server import MetricsServer, parse_metrics_listen

    where = parse_metrics_listen(app.settings.metrics_listen if listen is None else listen)
    if where is None:
        return None
    server = MetricsServer(*where, ScrapeAccess.from_settings(app.settings))
    host = f"[{where[0]}]" if ":" in where[0] else where[0]
    click.echo(f"Metrics on http://{host}:{server.port}/metrics", err=True)
    return server


_METRICS_LISTEN = click.option(
    "--metrics-listen",
    metavar="HOST:PORT",
    default=None,
    help="Answer Prometheus scrapes here (default MAILROOM_METRICS_LISTEN; none when unset).",
)


@click.command("worker")
@click.option(
    "--queues",
    default="all",
    show_default=True,
    help=f"Comma-separated queues to serve: {', '.join(QUEUES)}.",
)
@click.option(
    "--threads",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Worker threads per queue.",
)
@_METRICS_LISTEN
@pass_app
@plain_errors
def worker_command(app: AppContext, queues: str, threads: int, metrics_listen: str | None) -> None:
    """Run jobs from the given queues until SIGTERM (jobs in hand are finished)."""
    from mailroom.jobs.runtime import Runtime

    names = parse_queue_list(queues)
    runtime = Runtime(app.store, app.settings)
    metrics = _serve_metrics(app, metrics_listen)
    _stop_on_signals(runtime.stop)
    runtime.start_consumers(names, workers=threads)
    click.echo(f"mailroom worker is serving {', '.join(names)}.", err=True)
    runtime.wait()
    runtime.stop()
    if metrics is not None:
        metrics.stop()


@click.command("supervisor")
@click.option(
    "--poll-interval",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
    help="Seconds between reconciliation polls of each account.",
)
@_METRICS_LISTEN
@pass_app
@plain_errors
def supervisor_command(app: AppContext, poll_interval: float, metrics_listen: str | None) -> None:
    """Watch every active account (IMAP IDLE), poll, and run periodic duties until SIGTERM."""
    from mailroom.jobs.runtime import Runtime

    runtime = Runtime(app.store, app.settings, poll_interval=poll_interval)
    metrics = _serve_metrics(app, metrics_listen)
    _stop_on_signals(runtime.stop)
    runtime.start_supervisor()
    mode = "with Redis leases" if app.settings.redis_url else "alone (embedded)"
    click.echo(f"mailroom supervisor is running {mode}.", err=True)
    runtime.wait()
    runtime.stop()
    if metrics is not None:
        metrics.stop()


COMMANDS = [worker_command, supervisor_command]
