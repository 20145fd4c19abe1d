"""Labels and mail actions from the command line, for scripting and tests.

mailroom archive|trash|restore|inbox|spam|star|read|wake THREAD...
mailroom label NAME THREAD... [--remove]
mailroom snooze THREAD... --until 2025-01-31T09:00 | --for 3d
mailroom delete THREAD... --yes
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import click

from mailroom.cli.context import AppContext, pass_app, plain_errors
from mailroom.config import DEFAULT_OWNER
from mailroom.errors import ConfigError

if TYPE_CHECKING:
    from mailroom.labels.operations import Operations

# The label operations (and with them SQLAlchemy and the ORM) are imported when a
# command runs: `mailroom --help` imports this module to list its commands.

owner_option = click.option("--owner", default=DEFAULT_OWNER, show_default=True)
threads_argument = click.argument("threads", nargs=-1, required=True, type=int)


def _act(
    app: AppContext,
    owner: str,
    threads: tuple[int, ...],
    verb: str,
    action: Callable[[Operations, list[int]], list[int]],
) -> None:
    from mailroom.labels.operations import Operations
    from mailroom.owners import get_user

    with app.existing_store.session() as session:
        user = get_user(session, owner)
        ops = Operations(session, user.id)
        messages = ops.messages_of_threads(threads)
        changed = action(ops, messages)
    count = len(threads)
    click.echo(
        f"{verb} {count} thread{'s' * (count != 1)} "
        f"({len(changed)} message{'s' * (len(changed) != 1)} changed)."
    )


def _simple(
    name: str, verb: str, help_text: str, action: Callable[[Operations, list[int]], list[int]]
) -> click.Command:
    @click.command(name, help=help_text)
    @threads_argument
    @owner_option
    @pass_app
    @plain_errors
    def command(app: AppContext, threads: tuple[int, ...], owner: str) -> None:
        _act(app, owner, threads, verb, action)

    return command


archive_command = _simple(
    "archive", "Archived", "Archive threads (out of the Inbox).", lambda ops, ids: ops.archive(ids)
)
trash_command = _simple(
    "trash", "Trashed", "Move threads to the Trash.", lambda ops, ids: ops.trash(ids)
)
restore_command = _simple(
    "restore",
    "Restored",
    "Take threads out of the Trash, back to the Inbox.",
    lambda ops, ids: ops.restore(ids),
)
inbox_command = _simple(
    "inbox",
    "Moved to Inbox",
    "Move threads back to the Inbox.",
    lambda ops, ids: ops.move_to_inbox(ids),
)
spam_command = _simple(
    "spam", "Marked as spam", "Mark threads as spam.", lambda ops, ids: ops.spam(ids)
)


@click.command("star")
@threads_argument
@click.option("--off", is_flag=True, help="Unstar instead.")
@owner_option
@pass_app
@plain_errors
def star_command(app: AppContext, threads: tuple[int, ...], off: bool, owner: str) -> None:
    """Star (or with --off unstar) threads."""
    _act(
        app,
        owner,
        threads,
        "Unstarred" if off else "Starred",
        lambda ops, ids: ops.star(ids, starred=not off),
    )


@click.command("read")
@threads_argument
@click.option("--unread", is_flag=True, help="Mark unread instead.")
@owner_option
@pass_app
@plain_errors
def read_command(app: AppContext, threads: tuple[int, ...], unread: bool, owner: str) -> None:
    """Mark threads read (or with --unread, unread)."""
    _act(
        app,
        owner,
        threads,
        "Marked unread" if unread else "Marked read",
        lambda ops, ids: ops.mark_read(ids, read=not unread),
    )


@click.command("label")
@click.argument("name")
@threads_argument
@click.option("--remove", is_flag=True, help="Remove the label instead of adding it.")
@owner_option
@pass_app
@plain_errors
def label_command(
    app: AppContext, name: str, threads: tuple[int, ...], remove: bool, owner: str
) -> None:
    """Add a label (created if new; `Work/Invoices` nests) to threads, or --remove it."""
    parts = [part for part in name.split("/") if part.strip()]
    if not parts:
        raise ConfigError("A label name must not be empty.")
    from mailroom.labels.resolver import resolve_path
    from mailroom.owners import get_user

    with app.existing_store.session() as session:
        user = get_user(session, owner)
        label_id = resolve_path(session, user.id, parts).id
    _act(
        app,
        owner,
        threads,
        "Unlabelled" if remove else "Labelled",
        lambda ops, ids: ops.label(ids, label_id, on=not remove),
    )


_DURATION = re.compile(r"^(\d+)\s*([mhdw])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_wake_time(until: str | None, duration: str | None, now: datetime) -> datetime:
    """The wake time from --until (ISO 8601, local time = UTC) or --for (30m, 2h, 3d, 1w)."""
    if bool(until) == bool(duration):
        raise ConfigError("Give exactly one of --until TIME or --for DURATION.")
    if duration:
        match = _DURATION.match(duration.strip().lower())
        if not match:
            raise ConfigError(f"{duration!r} is not a duration; use e.g. 30m, 2h, 3d or 1w.")
        return now + timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    assert until is not None
    try:
        when = datetime.fromisoformat(until)
    except ValueError:
        raise ConfigError(f"{until!r} is not a time; use e.g. 2025-01-31T09:00.") from None
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    if when <= now:
        raise ConfigError(f"{until} is in the past; snooze needs a future time.")
    return when


@click.command("snooze")
@threads_argument
@click.option("--until", "until", help="Wake time, ISO 8601 (UTC unless an offset is given).")
@click.option("--for", "duration", help="Snooze for 30m, 2h, 3d or 1w.")
@owner_option
@pass_app
@plain_errors
def snooze_command(
    app: AppContext, threads: tuple[int, ...], until: str | None, duration: str | None, owner: str
) -> None:
    """Snooze threads: out of the Inbox until the wake time, then back and unread."""
    when = parse_wake_time(until, duration, datetime.now(UTC))
    from mailroom.labels.operations import Operations
    from mailroom.owners import get_user

    with app.existing_store.session() as session:
        user = get_user(session, owner)
        Operations(session, user.id).snooze(threads, when)
    click.echo(f"Snoozed {len(threads)} thread(s) until {when.isoformat(timespec='minutes')}.")


@click.command("wake")
@threads_argument
@owner_option
@pass_app
@plain_errors
def wake_command(app: AppContext, threads: tuple[int, ...], owner: str) -> None:
    """Wake snoozed threads now: back to the Inbox, newest message unread."""
    from mailroom.labels.operations import Operations
    from mailroom.owners import get_user

    with app.existing_store.session() as session:
        user = get_user(session, owner)
        Operations(session, user.id).wake(threads)
    click.echo(f"Woke {len(threads)} thread(s).")


@click.command("delete")
@threads_argument
@click.option("--yes", is_flag=True, help="Confirm: this cannot be undone.")
@owner_option
@pass_app
@plain_errors
def delete_command(app: AppContext, threads: tuple[int, ...], yes: bool, owner: str) -> None:
    """Delete threads forever (here and, once propagated, at the provider)."""
    if not yes:
        raise ConfigError("Deleting forever cannot be undone; add --yes to confirm.")
    _act(app, owner, threads, "Deleted", lambda ops, ids: ops.delete_forever(ids))


COMMANDS = [
    archive_command,
    trash_command,
    restore_command,
    inbox_command,
    spam_command,
    star_command,
    read_command,
    label_command,
    snooze_command,
    wake_command,
    delete_command,
]
