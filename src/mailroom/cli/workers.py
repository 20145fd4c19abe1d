"""``mailroom worker`` and ``mailroom supervisor``: the engine's processes at scale.

One machine: ``mailroom serve`` runs everything. Many machines (PostgreSQL +
Redis): any number of ``mailroom worker --queues ...`` and ``mailroom
supervisor`` processes, see docs/operations.md.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType

import click

from mailroom.cli.context import AppContext, pass_app, plain_errors
from mailroom.jobs.queues import QUEUES, parse_queue_list


def _stop_on_signals(stop: Callable[[], None]) -> None:
    def handler(signum: int, _frame: FrameType | None) -> None:
        click.echo(f"Received {signal.Signals(signum).name}; shutting down cleanly.", err=True)
        stop()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


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
@pass_app
@plain_errors
def worker_command(app: AppContext, queues: str, threads: int) -> None:
    """Run jobs from the given queues until SIGTERM (jobs in hand are finished)."""
    from mailroom.jobs.runtime import Runtime

    names = parse_queue_list(queues)
    runtime = Runtime(app.store, app.settings)
    _stop_on_signals(runtime.stop)
    runtime.start_consumers(names, workers=threads)
    click.echo(f"mailroom worker is serving {', '.join(names)}.", err=True)
    runtime.wait()
    runtime.stop()


@click.command("supervisor")
@click.option(
    "--poll-interval",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
    help="Seconds between reconciliation polls of each account.",
)
@pass_app
@plain_errors
def supervisor_command(app: AppContext, poll_interval: float) -> None:
    """Watch every active account (IMAP IDLE), poll, and run periodic duties until SIGTERM."""
    from mailroom.jobs.runtime import Runtime

    runtime = Runtime(app.store, app.settings, poll_interval=poll_interval)
    _stop_on_signals(runtime.stop)
    runtime.start_supervisor()
    mode = "with Redis leases" if app.settings.redis_url else "alone (embedded)"
    click.echo(f"mailroom supervisor is running {mode}.", err=True)
    runtime.wait()
    runtime.stop()


COMMANDS = [worker_command, supervisor_command]
