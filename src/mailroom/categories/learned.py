"""Tabs learned from the owner's corrections: a cascade stage above the rules.

When the owner moves a conversation to another tab, ``categories.corrections``
records the tab they want for each of its senders in
``users.settings["tab_corrections"]``. :class:`LearnedTabs` turns that record
into what the cascade asks: the tab for a sender the owner corrected, or —
when the owner moved mail from two or more senders of one domain and always
to the same tab — the tab for any sender of that domain. Built once per batch
or recomputation from settings already loaded, so it costs no query per
message.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mailroom.categories.tabs import CATEGORIES

_DOMAIN_AGREEMENT = 2  # corrected senders of one domain, all to one tab, before it counts


def corrections_of(settings: Any) -> dict[str, str]:
    """The owner's corrections in their settings: sender address -> tab."""
    found = settings.get("tab_corrections") if isinstance(settings, Mapping) else None
    if not isinstance(found, dict):
        return {}
    return {str(k): str(v) for k, v in found.items() if v in CATEGORIES}


@dataclass(frozen=True, slots=True)
class LearnedTabs:
    """Per-owner sender and domain preferences learned from corrections."""

    senders: Mapping[str, str] = field(default_factory=dict)
    domains: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Any) -> LearnedTabs:
        """What the owner's recorded corrections teach."""
        senders = {k.strip().lower(): v for k, v in corrections_of(settings).items()}
        by_domain: dict[str, set[str]] = defaultdict(set)
        counts: dict[str, int] = defaultdict(int)
        for sender, tab in senders.items():
            domain = sender.rpartition("@")[2]
            by_domain[domain].add(tab)
            counts[domain] += 1
        domains = {
            domain: next(iter(tabs))
            for domain, tabs in by_domain.items()
            if len(tabs) == 1 and counts[domain] >= _DOMAIN_AGREEMENT
        }
        return cls(senders, domains)

    def tab_for(self, sender: str) -> tuple[str, str] | None:
        """(tab, the one-sentence reason) for this lower-case sender, or None."""
        if tab := self.senders.get(sender):
            return tab, f"you moved mail from {sender} to {tab.capitalize()}"
        domain = sender.rpartition("@")[2]
        if domain and (tab := self.domains.get(domain)):
            return tab, f"you moved mail from senders at {domain} to {tab.capitalize()}"
        return None


NOTHING_LEARNED = LearnedTabs()
