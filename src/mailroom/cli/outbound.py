"""``mailroom outbound failed|retry|stats``: the operator's view of sending (SPEC §11).

``failed`` lists the submissions that gave up (newest first; ``--json`` for
alerting scripts, one object per line), ``retry ID`` queues one again as if
it were new (its attempts and its 6-hour window start afresh) and wakes its
lane's workers, ``stats`` counts per lane what is queued, deferred, being
handed over, sent and failed.

``failed`` reads the store file with the standard library alone; a sealed
submission in the list (``outbound.sealed_queue``), which that reader cannot
open, has the list read again through a session of the store, which has the keys.
"""

from __future__ import annotations

from collections.abc import Sequence

import click

from mailroom.cli.context import AppContext, echo_json, pass_app, plain_errors
from mailroom.cli.table import Column, operator_width, print_table

TABLE_WIDTH = 160
REASON_WIDTH = 90


@click.group("outbound")
def outbound_group() -> None:
    """Outgoing mail: the failed list, retrying one, the figures per lane."""


def _print(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> None:
    print_table(columns, rows, operator_width(TABLE_WIDTH))


@outbound_group.command("failed")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per failed send.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many.")
@pass_app
@plain_errors
def failed_command(app: AppContext, as_json: bool, limit: int | None) -> None:
    """List the mail that gave up, newest first, with the reason."""
    from mailroom.errors import SealedWithoutKeys
    from mailroom.outbound.failures import failed_list

    try:
        entries = failed_list(app.reader, limit=limit)
    except SealedWithoutKeys:
        with app.existing_store.session() as session:
            entries = failed_list(session, limit=limit)
    if as_json:
        for entry in entries:
            echo_json(entry.as_json())
        return
    if not entries:
        click.echo("No failed sends.")
        return
    headers = ("id", "lane", "failed", "account", "to", "tries", "code")
    columns = [*(Column(header) for header in headers), Column("reason", REASON_WIDTH)]
    rows = []
    for entry in entries:
        more = len(entry.recipients) - 1
        rows.append(
            (
                str(entry.submission_id),
                entry.lane,
                f"{entry.failed_at:%Y-%m-%d %H:%M}",
                entry.account,
                (entry.recipients[0] if entry.recipients else "-")
                + (f" +{more}" if more > 0 else ""),
                str(entry.attempts),
                str(entry.code) if entry.code is not None else "-",
                entry.reason,
            )
        )
    _print(columns, rows)


@outbound_group.command("retry")
@click.argument("submission_id", metavar="ID", type=int)
@pass_app
@plain_errors
def retry_command(app: AppContext, submission_id: int) -> None:
    """Queue a failed send again (ID from `mailroom outbound failed`)."""
    from mailroom.jobs.sending import waking
    from mailroom.outbound.queueing import retry_submission

    store = app.existing_store
    with waking(store, app.settings), store.session() as session:
        lane = retry_submission(session, submission_id)
    click.echo(f"Submission {submission_id} is queued again in the {lane} lane.")


@outbound_group.command("stats")
@click.option("--json", "as_json", is_flag=True, help="One JSON object with a key per lane.")
@pass_app
@plain_errors
def stats_command(app: AppContext, as_json: bool) -> None:
    """Per lane: mail queued (of it deferred), being handed over, sent and failed."""
    from mailroom.outbound.failures import STAT_COLUMNS, lane_stats

    stats = lane_stats(app.reader)
    if as_json:
        echo_json(stats)
        return
    _print(
        [Column("lane"), *(Column(column) for column in STAT_COLUMNS)],
        [
            (lane, *(str(figures[column]) for column in STAT_COLUMNS))
            for lane, figures in stats.items()
        ],
    )
