"""``mailroom backfill categories``: recompute correspondents, categories and tabs."""

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
