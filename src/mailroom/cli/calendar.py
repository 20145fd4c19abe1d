"""``mailroom calendar url|off USER``: the secret address of a user's events feed.

The feed (``/calendar/<token>.ics`` on the web server) lists the events
found in the user's mail — flights, hotel stays, tickets, parcel deliveries
(:mod:`mailroom.events`). Calendar programs cannot sign in, so the address is
the credential: ``url`` makes a new one and prints it (only its hash is
stored, so it cannot be shown again; the previous address stops working),
``off`` switches the feed off. Events already stored before mailroom learned
to read them are found by ``mailroom backfill events``.
"""

from __future__ import annotations

import click

from mailroom.cli.context import AppContext, pass_app, plain_errors


@click.group("calendar")
def calendar_group() -> None:
    """The calendar feed of events found in mail (flights, stays, tickets, parcels)."""


@calendar_group.command("url")
@click.argument("user")
@click.option(
    "--base-url",
    envvar="MAILROOM_BASE_URL",
    default="http://127.0.0.1:8025",
    show_default=True,
    help="The web server's address as calendar programs reach it (env MAILROOM_BASE_URL).",
)
@pass_app
@plain_errors
def url_command(app: AppContext, user: str, base_url: str) -> None:
    """Make a new feed address for USER and print it (the previous one stops working)."""
    from mailroom.events.feed_tokens import feed_path, new_feed_token
    from mailroom.owners import get_user

    with app.existing_store.session() as session:
        user_id = get_user(session, user).id
        token = new_feed_token(session, user_id)
    click.echo(base_url.rstrip("/") + feed_path(token))


@calendar_group.command("off")
@click.argument("user")
@pass_app
@plain_errors
def off_command(app: AppContext, user: str) -> None:
    """Switch USER's feed off: its address stops working."""
    from mailroom.events.feed_tokens import drop_feed
    from mailroom.owners import get_user

    with app.existing_store.session() as session:
        had = drop_feed(session, get_user(session, user).id)
    click.echo("The calendar feed is off." if had else f"{user} had no calendar feed.")
