"""``mailroom audit``: who signed in, made tokens, added accounts, made backups — newest first.

``--since`` takes a date (``2026-12-01``), a UTC time (``2026-12-01T08:00``) or
a duration back from now (``12h``, ``7d``, ``2w``).
"""

from __future__ import annotations

from datetime import UTC, datetime

import click

from mailroom.cli.context import AppContext, echo_json, format_option, pass_app, plain_errors
from mailroom.errors import ConfigError, StoreError


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """A date, a UTC date and time, or a duration back from ``now``; ConfigError otherwise."""
    from mailroom.cli.users import parse_duration

    text = text.strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        try:
            return (now or datetime.now(UTC)) - parse_duration(text)
        except ConfigError:
            raise ConfigError(
                f"--since {text!r} is neither a date (2026-12-01), a UTC time "
                "(2026-12-01T08:00) nor a duration (12h, 7d, 2w)."
            ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def record_command(app: AppContext, action: str, detail: str) -> None:
    """Audit a command's ``action`` in the store, if there is one yet (``keys init``)."""
    from mailroom.audit import record

    try:
        store = app.existing_store
    except StoreError:
        return  # no store yet: nothing to record into, and nothing to protect
    with store.session() as session:
        record(session, action, detail=detail)


@click.command("audit")
@click.option("--user", "user", default=None, help="Only entries about this user.")
@click.option("--since", default=None, metavar="WHEN", help="Only entries since: 2026-12-01, 7d.")
@click.option(
    "--limit",
    default=50,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="At most this many entries.",
)
@format_option("table", "jsonl", "jsonl: one JSON object per entry, for programs.")
@pass_app
@plain_errors
def audit_command(
    app: AppContext, user: str | None, since: str | None, limit: int, output: str
) -> None:
    """Show the audit log: sign-ins, tokens, accounts, keys, backups (newest first, UTC)."""
    from mailroom.audit.query import entries

    moment = parse_since(since) if since is not None else None
    rows = [
        {
            "at": entry.at.strftime("%Y-%m-%d %H:%M:%S"),
            "action": entry.action,
            "user": entry.user_name,
            "via": entry.via,
            "origin": entry.origin,
            "detail": entry.detail,
        }
        for entry in entries(app.reader, user=user, since=moment, limit=limit)
    ]
    if output == "jsonl":
        for row in rows:
            echo_json(row)
        return
    if not rows:
        click.echo("The audit log has no entries" + (" matching that." if user or since else "."))
        return
    for row in rows:
        who = row["user"] or "-"
        where = f"{row['via']} {row['origin'] or ''}".strip()
        detail = f"  {row['detail']}" if row["detail"] else ""
        click.echo(f"{row['at']}  {row['action']:<18} {who:<16} {where}{detail}")
