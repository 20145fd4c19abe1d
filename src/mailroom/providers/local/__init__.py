"""Local sources (mbox, Maildir, a folder of .eml files): the offline provider."""

from mailroom.providers.local.importer import ImportSummary, import_path
from mailroom.providers.local.source import LocalMessage, open_source

__all__ = ["ImportSummary", "LocalMessage", "import_path", "open_source"]
