"""``mailroom backfill categories|events``: recompute tabs, or find events, from stored mail."""

from __future__ import annotations

import click

from mailroom.categories.recompute import backfill_categories
from mailroom.cli.context import AppContext, pass_app, plain_errors
from mailroom.owners import DEFAULT_OWNER, get_user


@click.group("backfill")
def backfill_group() -> None:
    """Recompute derived data from what the store already holds (nothing is fetched)."""


@backfill_group.command("categories")
@click.option("--owner", default=DEFAULT_OWNER, show_default=True, help="Whose mail to re-sort.")
@pass_app
@plain_errors
def categories_command(app: AppContext, owner: str) -> None:
    """Recount correspondents, recompute every message's category and every conversation's tab.

    Only conversations whose tab changed are announced to JMAP clients.
    """
    with app.existing_store.session() as session:
        user = get_user(session, owner)
        result = backfill_categories(session, user.id)
    done = result.recategorized
    click.echo(
        f"{result.contacts} correspondents ({result.new_contacts} new); "
        f"{done.messages} messages checked, {done.changed_messages} changed category; "
        f"{len(done.changed_threads)} conversations changed tab."
    )


@backfill_group.command("events")
@click.option("--owner", default=DEFAULT_OWNER, show_default=True, help="Whose mail to read.")
@pass_app
@plain_errors
def events_command(app: AppContext, owner: str) -> None:
    """Find the events (flights, stays, tickets, parcels) in mail stored before.

    New mail is read as it arrives; this reads what is already stored. Running it
    again adds nothing twice.
    """
    from mailroom.events.extract import backfill_events

    with app.existing_store.session() as session:
        user_id = get_user(session, owner).id
    result = backfill_events(app.existing_store, user_id)
    click.echo(f"{result.messages} messages with structured data read; {result.events} new events.")
