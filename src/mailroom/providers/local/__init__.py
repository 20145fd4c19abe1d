"""Local sources (mbox, Maildir, a folder of .eml files): the offline provider."""

import click

from mailroom.providers import registry
from mailroom.providers.local.importer import ImportSummary, import_path
from mailroom.providers.local.propagator import PROVIDER, LocalPropagator
from mailroom.providers.local.provider import LocalImporter
from mailroom.providers.local.source import LocalMessage, open_source

__all__ = [
    "ImportSummary",
    "LocalImporter",
    "LocalMessage",
    "LocalPropagator",
    "import_path",
    "open_source",
]


def _add_command() -> click.Command:
    from mailroom.providers.local.cli import add_local_command  # the CLI only, when asked

    return add_local_command


# No syncer and no watcher: a file source changes only when it is imported again
# (`mailroom import PATH`, or this importer). `mailroom import` adds an account too;
# `account add local` names one ahead, with an outgoing server.
registry.register(
    registry.ProviderEntry(
        name=PROVIDER,
        importer=LocalImporter,
        propagator=LocalPropagator,
        add_command=_add_command,
    )
)
