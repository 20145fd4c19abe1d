"""Local sources (mbox, Maildir, a folder of .eml files): the offline provider."""

from mailroom.providers import registry
from mailroom.providers.local.importer import ImportSummary, import_path
from mailroom.providers.local.propagator import PROVIDER, LocalPropagator
from mailroom.providers.local.source import LocalMessage, open_source

__all__ = ["ImportSummary", "LocalMessage", "LocalPropagator", "import_path", "open_source"]

# Only the propagator so far: local files are imported by `mailroom import`, not by jobs.
registry.register(registry.ProviderEntry(name=PROVIDER, propagator=LocalPropagator))
