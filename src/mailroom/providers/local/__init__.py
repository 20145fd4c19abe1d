"""Local sources (mbox, Maildir, a folder of .eml files): the offline provider."""

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

# No syncer and no watcher: a file source changes only when it is imported again
# (`mailroom import PATH`, or this importer); no add command: `mailroom import` adds it.
registry.register(
    registry.ProviderEntry(name=PROVIDER, importer=LocalImporter, propagator=LocalPropagator)
)
