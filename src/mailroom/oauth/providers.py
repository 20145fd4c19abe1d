"""The ``gmail`` and ``microsoft`` provider entries: for now only their ``account add`` command.

The syncers, importers and propagators of these providers are built in
``providers/gmail`` and ``providers/graph``. Until those register full entries,
this module registers entries holding only the connect command, so that
``mailroom account add gmail`` / ``microsoft`` exist. It never replaces an entry
another module registered: it only adds the command to one that has none.
A full entry registered later should take its ``add_command`` from
:func:`gmail_add_command` / :func:`microsoft_add_command`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from mailroom.providers import registry

if TYPE_CHECKING:
    import click

__all__ = ["gmail_add_command", "microsoft_add_command", "register_connect_commands"]


def gmail_add_command() -> click.Command:
    """``mailroom account add gmail`` (imports the CLI only when asked)."""
    from mailroom.oauth.cli import add_gmail_command

    return add_gmail_command


def microsoft_add_command() -> click.Command:
    """``mailroom account add microsoft`` (imports the CLI only when asked)."""
    from mailroom.oauth.cli import add_microsoft_command

    return add_microsoft_command


COMMANDS: dict[str, Callable[[], click.Command]] = {
    "gmail": gmail_add_command,
    "microsoft": microsoft_add_command,
}


def register_connect_commands() -> None:
    """Offer the connect commands, keeping whatever else the entries already hold."""
    for name, command in COMMANDS.items():
        entry = registry.find(name)
        if entry is None:
            registry.register(registry.ProviderEntry(name=name, add_command=command))
        elif entry.add_command is None:
            registry.register(replace(entry, add_command=command))


register_connect_commands()
