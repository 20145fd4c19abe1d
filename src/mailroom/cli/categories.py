"""``mailroom categories list|on|off``: which inbox tabs the owner uses."""

from __future__ import annotations

import click

from mailroom.categories.tabs import CATEGORIES, PRIMARY
from mailroom.cli.context import AppContext, pass_app, plain_errors
from mailroom.config import DEFAULT_OWNER
from mailroom.errors import ConfigError

# `categories list` reads the user's settings with plain SQL (categories.explaining);
# switching a tab re-sorts the mail through the ORM, imported when that runs.

owner_option = click.option(
    "--owner", default=DEFAULT_OWNER, show_default=True, help="Whose tabs these are."
)


def _tab(name: str) -> str:
    tab = name.strip().lower()
    if tab not in CATEGORIES:
        raise ConfigError(f"{name!r} is not a tab; use one of {', '.join(CATEGORIES)}.")
    if tab == PRIMARY:
        raise ConfigError("Primary cannot be switched off; it is where mail of other tabs goes.")
    return tab


@click.group("categories")
def categories_group() -> None:
    """Inbox tabs: a tab that is switched off gets no mail (it goes to Primary)."""


@categories_group.command("list")
@owner_option
@pass_app
@plain_errors
def list_command(app: AppContext, owner: str) -> None:
    """Show every tab and whether it is on."""
    from mailroom.categories.explaining import tabs_off, user_settings
    from mailroom.reading import user_id

    reader = app.reader
    off = tabs_off(user_settings(reader, user_id(reader, owner)))
    for tab in CATEGORIES:
        click.echo(f"{tab}: {'off' if tab in off else 'on'}")


def _switch(app: AppContext, owner: str, name: str, on: bool) -> None:
    from mailroom.categories.correspondents import switched_off
    from mailroom.categories.recompute import recategorize
    from mailroom.owners import get_user
    from mailroom.store.models import User

    tab = _tab(name)
    with app.existing_store.session() as session:
        user = session.get(User, get_user(session, owner).id)
        assert user is not None
        off = set(switched_off(session, user.id))
        before = set(off)
        if on:
            off.discard(tab)
        else:
            off.add(tab)
        if off == before:
            click.echo(f"{tab.capitalize()} is already {'on' if on else 'off'}.")
            return
        user.settings = {**(user.settings or {}), "categories_off": sorted(off)}
        session.flush()
        result = recategorize(session, user.id)
    click.echo(
        f"{tab.capitalize()} is now {'on' if on else 'off'}; "
        f"{len(result.changed_threads)} conversations changed tab."
    )


@categories_group.command("off")
@click.argument("tab")
@owner_option
@pass_app
@plain_errors
def off_command(app: AppContext, tab: str, owner: str) -> None:
    """Switch a tab off: its mail goes to Primary (reason `switched_off`)."""
    _switch(app, owner, tab, on=False)


@categories_group.command("on")
@click.argument("tab")
@owner_option
@pass_app
@plain_errors
def on_command(app: AppContext, tab: str, owner: str) -> None:
    """Switch a tab on again and re-sort the mail."""
    _switch(app, owner, tab, on=True)
