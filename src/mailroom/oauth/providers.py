"""The ``account add gmail`` / ``microsoft`` commands, as the provider entries offer them.

``providers/gmail/provider.py`` and ``providers/graph/provider.py`` register their
entries with these as ``add_command``; each imports the CLI only when asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import click

__all__ = ["gmail_add_command", "microsoft_add_command"]


def gmail_add_command() -> click.Command:
    """``mailroom account add gmail`` (imports the CLI only when asked)."""
    from mailroom.oauth.cli import add_gmail_command

    return add_gmail_command


def microsoft_add_command() -> click.Command:
    """``mailroom account add microsoft`` (imports the CLI only when asked)."""
    from mailroom.oauth.cli import add_microsoft_command

    return add_microsoft_command
