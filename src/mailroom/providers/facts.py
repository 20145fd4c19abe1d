"""What the read path knows of each provider, as plain data: no provider is imported.

A provider's services are found through :mod:`.registry`, which imports the
provider's package (for IMAP: imapclient, the ORM, SQLAlchemy). ``mailroom
accounts`` must start as fast as the other read commands, so what it needs to
know of a provider is declared here, by name, as data:

* ``paged_import``: the provider imports an account's history page by page over
  many jobs, and keeps ``Account.import_finished_at`` in step with it: null while
  history is left, set once none is (IMAP: :func:`.imap.state.mark_import`).
  Such an account is importing while that column is null. A provider whose import
  is one call (local files) is never importing.

A provider not declared here (a plugin this process has not imported) counts as
never importing, as it did when the registry had no importer for it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ProviderFacts", "declare", "facts_of", "importing"]


@dataclass(frozen=True, slots=True)
class ProviderFacts:
    """What one provider declares for readers that do not import it."""

    name: str
    paged_import: bool = False


_FACTS: dict[str, ProviderFacts] = {}


def declare(facts: ProviderFacts) -> None:
    """Declare (or replace) the facts of the provider ``facts.name``."""
    _FACTS[facts.name] = facts


def facts_of(name: str) -> ProviderFacts | None:
    """The facts the provider called ``name`` declared, or None."""
    return _FACTS.get(name)


def importing(provider: str, status: str, import_finished_at: object) -> bool:
    """Whether an account is still importing its history, from its row alone."""
    if status == "disconnected":  # a disconnected account imports nothing
        return False
    declared = facts_of(provider)
    return declared is not None and declared.paged_import and import_finished_at is None


declare(ProviderFacts("imap", paged_import=True))
declare(ProviderFacts("local", paged_import=False))
# The Gmail backfill (providers/gmail/importer.py) keeps import_finished_at in step.
declare(ProviderFacts("gmail", paged_import=True))
# The Graph importer (providers/graph/importer.py) keeps import_finished_at in step.
declare(ProviderFacts("microsoft", paged_import=True))
